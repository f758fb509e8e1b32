"""``polygemm tune`` on the CPU: which products it tunes (--shape, --shapes, --from a recording),
its table and JSON, its usage errors, and --holdout (the cost model judged on shapes it was not
fitted to). The tuning itself is a stand-in backend's here (tests/backends/cuda/test_tune_gpu.py
runs it on a GPU)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import polygemm
from polygemm.apps import tune as tune_app
from polygemm.apps.bench_layout import Shape
from polygemm.apps.tune import Job, TuneRow, tune_table
from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.tune_cache import Measurement, now_text
from polygemm.errors import UnsupportedProblemError
from polygemm.problem import normalize

from tests.helpers import cli, cli_error_line, usage_error


class FakeTuner:
    """A backend that tunes: each product's winner is ``fast`` at half the pick's time, except
    products with K = 7, which nothing can run."""

    name = "cuda"

    def __init__(self):
        self.tuned_problems = []
        self.kept: dict = {}

    def device_name(self):
        return "Stand-in GPU"

    def tune(self, p, *, top, splits, force, budget_s):
        self.tuned_problems.append((p, top, splits, force, budget_s))
        if p.k == 7:
            raise UnsupportedProblemError("no kernel takes K = 7")
        key = (p.m, p.n, p.k, p.dtype.name)
        if key in self.kept and not force:
            return None, self.kept[key]
        m = Measurement("fast", 2.0, {"pick": 4.0, "fast": 2.0}, "pick", 3.0, now_text(), "0")
        if p.m == 64:
            m = Measurement("pick", 4.0, {"pick": 4.0, "fast": 5.0}, "pick", 3.0, now_text(), "0")
        self.kept[key] = m
        return None, m


@pytest.fixture
def tuner(monkeypatch):
    be = FakeTuner()
    monkeypatch.setattr(tune_app, "tuning_backend", lambda device: be)
    return be


def test_tune_times_each_shape_once_and_prints_winner_pick_and_gain(capsys, tuner):
    rc, out, err = cli(capsys, ["tune", "--shape", "512x256x1024:nt", "--shape", "64x64x64", "--shapes", "64x64x64,128x128x7",
                                "--top", "3", "--splits", "1", "--budget", "2.5"])
    assert rc == 0, err
    assert [(p.m, p.n, p.k) for p, *_ in tuner.tuned_problems] == [(512, 256, 1024), (64, 64, 64), (128, 128, 7)]
    p, top, splits, force, budget = tuner.tuned_problems[0]
    assert (p.a.layout, p.b.layout, p.dtype.name, top, splits, force, budget) == ("row", "col", "float16", 3, 1, False, 2.5)
    header = next(ln for ln in out.splitlines() if ln.startswith("shape"))
    assert all(word in header for word in ("winner", "µs", "estimate pick", "gain"))
    row = next(ln for ln in out.splitlines() if ln.startswith("512x256x1024:nt"))
    assert row.split()[2:] == ["fast", "2.0", "pick", "4.0", "2.00x"]
    same = next(ln for ln in out.splitlines() if ln.startswith("64x64x64 "))
    assert "(same)" in same and "1.00x" in same
    assert "not tuned" in next(ln for ln in out.splitlines() if ln.startswith("128x128x7")) and "K = 7" in out
    assert "2 of 3 products tuned" in out and "overrules the estimate on 1" in out
    assert out.strip().splitlines()[-1].endswith("polygemm bench --shapes takes them: 512x256x1024:nt")


def test_a_product_already_measured_says_cached(capsys, tuner):
    rc, out, _ = cli(capsys, ["tune", "--shape", "512x256x1024"])
    assert "(cached)" not in out
    tuner.kept = {k: dataclasses.replace(m, measured_at="2026-01-01T00:00:00+00:00") for k, m in tuner.kept.items()}
    rc, out, _ = cli(capsys, ["tune", "--shape", "512x256x1024"])
    assert rc == 0 and "(cached)" in out
    rc, out, _ = cli(capsys, ["tune", "--shape", "512x256x1024", "--force"])
    assert "(cached)" not in out and tuner.tuned_problems[-1][3] is True


def test_tune_json_holds_every_row(capsys, tuner, tmp_path):
    rc, out, _ = cli(capsys, ["tune", "--shape", "512x256x1024", "--dtype", "bfloat16", "--out-dtype", "float32", "--json"])
    rows = json.loads(out)["rows"]
    assert rc == 0 and rows[0]["winner"] == "fast" and rows[0]["gain"] == 2.0 and rows[0]["dtype"] == "bfloat16"
    assert rows[0]["out_dtype"] == "float32" and tuner.tuned_problems[0][0].out_dtype.name == "float32"


def test_the_real_preset_is_tuned_as_bench_names_it(capsys, tuner):
    rc, out, _ = cli(capsys, ["tune", "--shapes", "real"])
    from polygemm.apps.bench_real import real_shapes

    assert rc == 0 and len(tuner.tuned_problems) == len(real_shapes())
    layouts = {(p.a.layout, p.b.layout) for p, *_ in tuner.tuned_problems}
    assert ("row", "col") in layouts and ("col", "row") in layouts  # nt weights and tn gradients


def test_every_product_failing_is_status_1(capsys, tuner):
    rc, out, _ = cli(capsys, ["tune", "--shape", "128x128x7"])
    assert rc == 1 and "not tuned" in out


@pytest.mark.parametrize("argv, words", [
    (["tune"], ["--shape", "--shapes", "--from"]),
    (["tune", "--shapes", "rael"], ["--shapes", "real"]),
    (["tune", "--from", "/nonexistent/shapes.jsonl"], ["--from", "cannot be read"]),
])
def test_tune_usage_errors_say_what_to_give(capsys, tuner, argv, words):
    line = cli_error_line(capsys, argv)
    assert all(w in line for w in words), line


@pytest.mark.parametrize("argv, words", [
    (["tune", "--shape", "512x256"], ["shape", "MxNxK"]),
    (["tune", "--shape", "8x8x8:nx"], ["layout", "nn, nt, tn"]),
    (["tune", "--shape", "8x8x8", "--budget", "0"], ["--budget", "seconds > 0"]),
    (["tune", "--shape", "8x8x8", "--top", "0"], ["--top", ">= 1"]),
])
def test_tune_argument_errors_are_usage_errors(capsys, argv, words):
    line = usage_error(capsys, argv)
    assert all(w in line for w in words), line


def test_tune_from_a_recording_refuses_the_dtype_and_batch_options_it_would_drop(capsys, tmp_path, tuner):
    path = tmp_path / "shapes.jsonl"
    path.write_text('{"m": 8, "n": 8, "k": 8, "dtype": "float16"}\n')
    line = cli_error_line(capsys, ["tune", "--from", str(path), "--dtype", "float32"])
    assert "--dtype float32" in line and "recorded with" in line and "--shape" in line
    line = cli_error_line(capsys, ["tune", "--from", str(path), "--batch", "3", "--out-dtype", "float32"])
    assert "--out-dtype float32" in line and "--batch 3" in line
    # beside --shape products, --dtype is theirs
    rc, _, err = cli(capsys, ["tune", "--from", str(path), "--shape", "16x16x16", "--dtype", "float32"])
    assert rc == 0, err
    assert [p.dtype.name for p, *_ in tuner.tuned_problems] == ["float32", "float16"]


def test_tune_refuses_a_backend_without_a_tuning_cache(capsys):
    line = cli_error_line(capsys, ["tune", "--shape", "8x8x8", "--device", "cpu"])
    assert "cpu" in line and "no tuning cache" in line and "--device cuda" in line


def test_a_run_records_its_new_products_and_tune_reads_them_back(tmp_path, monkeypatch, capsys, tuner):
    path = tmp_path / "shapes.jsonl"
    be = CudaBackend()  # planning only: no device needed
    h = np.float16
    wt = np.zeros((256, 1024), h).T
    with polygemm.tuning.record(path):
        be.plan(normalize(np.zeros((512, 1024), h), wt))
        be.plan(normalize(np.zeros((512, 1024), h), wt))  # the same product: recorded once
        be.plan(normalize(np.zeros((4, 64, 32), np.float32), np.zeros((4, 32, 16), np.float32)))
        be.plan(normalize(np.zeros((8, 8), h), np.zeros((8, 8), h)), "hgemm_v1_mma_ldmatrix")  # named: not auto's
        out = np.zeros((8, 16), h).T  # a column-major result
        be.plan(normalize(np.zeros((16, 4), h), np.zeros((4, 8), h), out=out))
    be.plan(normalize(np.zeros((9, 9), h), np.zeros((9, 9), h)))  # outside the block
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(r["m"], r["n"], r["k"], r["layout"], r["dtype"], r["batch"]) for r in lines] == [
        (512, 256, 1024, "nt", "float16", 0), (64, 16, 32, "nn", "float32", 4), (16, 8, 4, "nn", "float16", 0)]
    assert lines[2]["out_layout"] == "col"
    rc, text, err = cli(capsys, ["tune", "--from", str(path)])
    assert rc == 0, err
    got = [(p.m, p.n, p.k, p.dtype.name, p.count, p.a.layout, p.b.layout, p.result_layout) for p, *_ in tuner.tuned_problems]
    assert got == [(512, 256, 1024, "float16", 1, "row", "col", "row"), (64, 16, 32, "float32", 4, "row", "row", "row"),
                   (16, 8, 4, "float16", 1, "row", "row", "col")]
    assert "4 x 64x16x32 float32" in text


def test_recording_by_environment_variable(tmp_path, monkeypatch):
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("POLYGEMM_RECORD_SHAPES", str(path))
    CudaBackend().plan(normalize(np.zeros((33, 65), np.float32), np.zeros((65, 17), np.float32)))
    assert json.loads(path.read_text())["m"] == 33


def test_a_recording_that_is_not_one_is_refused_naming_the_line(capsys, tmp_path, tuner):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"m": 1, "n": 2, "k": 3, "layout": "nn", "dtype": "float16"}\nnot json\n')
    line = cli_error_line(capsys, ["tune", "--from", str(path)])
    assert "line 2" in line and "not a recorded product" in line
    path.write_text('{"m": 1, "n": 2, "k": 3, "dtype": "float16", "batch": "abc"}\n')  # a batch that is no integer
    assert "line 1" in cli_error_line(capsys, ["tune", "--from", str(path)])
    path.write_bytes(b"\xff\xfe\x00")  # no text at all: named by the file, not by the codec alone
    line = cli_error_line(capsys, ["tune", "--from", str(path)])
    assert str(path) in line and "not UTF-8" in line
    path.write_text('{"m": 1, "n": 2, "k": 3, "dtype": "complex64"}\n')  # nothing cuda's auto weighs
    line = cli_error_line(capsys, ["tune", "--from", str(path)])
    assert "no product the cuda backend tunes" in line and "name the products" not in line


def test_an_unwritable_recording_warns_and_the_run_goes_on(tmp_path):
    with pytest.warns(RuntimeWarning, match="cannot record shapes"):
        with polygemm.tuning.record(tmp_path / "missing" / "shapes.jsonl"):
            plan = CudaBackend().plan(normalize(np.zeros((31, 7), np.float32), np.zeros((7, 5), np.float32)))
    assert plan.variant


def test_the_table_of_rows():
    rows = [TuneRow(Job(Shape(8, 8, 8, "tn"), "float16", "float32", 2), "w", 1.5, "p", 3.0),
            TuneRow(Job((4, 4, 4), "float32", "float32"), error="UnsupportedProblemError: nothing")]
    text = tune_table(rows)
    assert "2 x 8x8x8:tn float16->float32" in text and "2.00x" in text and "not tuned: UnsupportedProblemError" in text
    assert math.isnan(TuneRow(Job((1, 1, 1), "float32", "float32")).gain)


def test_holdout_judges_the_cost_model_on_shapes_it_was_not_fitted_to(capsys):
    rc, out, err = cli(capsys, ["tune", "--holdout", "0.2", "--dtype", "float32", "--seed", "3", "--json"])
    assert rc == 0, err
    rows = json.loads(out)["dtypes"]["float32"]
    assert rows and all(r["best_us"] > 0 and r["pick"] for r in rows)
    measured = [r for r in rows if r["pick_us"] is not None]
    assert all(r["best_us"] <= r["pick_us"] * (1 + 1e-9) for r in measured)  # nothing beats the measured best
    rc, text, _ = cli(capsys, ["tune", "--holdout", "0.2", "--dtype", "float32", "--seed", "3"])
    assert "held-out shapes" in text and "fitted on every shape" in text
    # the share asked is said as given: 0.9999 is not "1", which --holdout refuses
    rc, text, _ = cli(capsys, ["tune", "--holdout", "0.9999", "--dtype", "float32"])
    assert rc == 0 and "(0.9999 asked" in text


def test_holdout_picks_for_the_result_the_planner_makes():
    """An M×1 product is judged with the column-major result the planner makes for it (the rungs of a small M serve it
    through the operand swap, as where it was measured): with every measurement, the judge picks what auto runs."""
    from polygemm.apps.tune_holdout import _pick
    from polygemm.backends.cuda.catalog import tuning_records

    be = CudaBackend()
    be._rt = None  # planned as for any sm_90 device of 132 SMs (no GPU needed)
    for m, k in ((8192, 8192), (4096, 4096), (8192, 512)):
        plan = be.plan(normalize(np.zeros((m, k), np.float32), np.zeros((k, 1), np.float32)))
        assert _pick("float32", tuple(tuning_records("float32")), (m, 1, k, 1), 90, 132) == plan.variant, (m, k)


def test_holdout_fraction_must_be_a_share(capsys):
    line = cli_error_line(capsys, ["tune", "--holdout", "1.5"])
    assert "--holdout" in line and "between 0 and 1" in line
    # a value that is no number at all is told what the option takes, not only that it is no float
    rc, out, err = cli(capsys, ["tune", "--holdout", "abc"])
    assert rc == 2 and "--holdout" in err and "fraction between 0 and 1, exclusive" in err and "'abc'" in err
    assert "invalid float value" not in err
    line = cli_error_line(capsys, ["tune", "--holdout", "0.2", "--shape", "8x8x8"])
    assert "--holdout" in line and "--shape" in line
    # options --holdout does not read are refused, not dropped (a typo in --device is no silent pass)
    line = cli_error_line(capsys, ["tune", "--holdout", "0.2", "--device", "cdua", "--batch", "4", "--force"])
    assert "not --batch, --device, --force" in line and "takes --dtype, --seed and --json" in line


def test_holdout_split_is_seeded_and_keeps_both_sides():
    from polygemm.apps.tune_holdout import split_shapes

    shapes = [(i, 1, 1, 1) for i in range(10)]
    out, kept = split_shapes(shapes, 0.3, 1)
    assert len(out) == 3 and len(kept) == 7 and out == split_shapes(shapes, 0.3, 1)[0]
    assert split_shapes(shapes[:2], 0.99, 0)[1]  # one shape is always kept to fit on


def test_float64_products_are_tuned_too(capsys, tuner):
    # float64 has several rungs and K-slices to choose from (the DMMA tiles, the skinny rung)
    rc, out, _ = cli(capsys, ["tune", "--shape", "128x4608x3584:nt", "--dtype", "float64", "--json"])
    rows = json.loads(out)["rows"]
    assert rc == 0 and rows[0]["dtype"] == "float64" and tuner.tuned_problems[0][0].dtype.name == "float64"


@pytest.mark.parametrize("line", ['{"m": 1e400, "n": 4, "k": 16, "dtype": "float32"}', '{"m": 4, "n": 4, "k": 16, "dtype": "float32", "batch": Infinity}',
                                  '{"m": 4, "n": 4, "k": 16, "dtype": "float32", "batch": 1.5}', '{"m": true, "n": 4, "k": 16, "dtype": "float32"}'],
                         ids=["1e400", "Infinity", "1.5", "true"])
def test_a_recording_of_sizes_that_are_not_integers_is_one_line_naming_the_line(tmp_path, capsys, line):
    rec = tmp_path / "rec.jsonl"
    rec.write_text(line + "\n")
    said = cli_error_line(capsys, ["tune", "--from", str(rec), "--device", "cpu"])
    assert "line 1: not a recorded product" in said


def test_seed_without_holdout_is_refused_naming_holdout(capsys):
    line = cli_error_line(capsys, ["tune", "--seed", "3", "--shape", "8x8x8", "--device", "cpu"])
    assert "--seed 3" in line and "--holdout" in line


def test_tune_device_auto_is_refused_naming_what_it_takes(capsys):
    from tests.helpers import cli_error_line

    line = cli_error_line(capsys, ["tune", "--shape", "64x64x64", "--device", "auto"])
    assert "--device auto" in line and "--device cuda or cuda:N" in line and "cpu" not in line


def test_a_recording_cut_off_mid_line_keeps_the_next_record_and_reads_without_the_cut_one(tmp_path):
    """A run killed mid-write leaves a line without its end: the next record starts a line of its own, and reading
    passes over a cut last line with a warning instead of refusing every product."""
    from polygemm.problem import normalize
    from polygemm.tuning import read_records, record, record_problem

    path = tmp_path / "calls.jsonl"
    path.write_text('{"batch": 0, "dtype": "float16", "k": 4, "layout": "nn", "m": 3, "n": 5, "out_dtype": "float16"}\n'
                    '{"batch": 0, "dtype": "flo')
    with pytest.warns(RuntimeWarning, match=r"line 2: a record cut off"):
        assert [(r["m"], r["n"], r["k"]) for r in read_records(path)] == [(3, 5, 4)]
    with record(path):
        record_problem(normalize(np.zeros((7, 8), np.float16), np.zeros((8, 9), np.float16)))
    with pytest.raises(ValueError, match="line 2: not a recorded product"):  # mid-file now: said, not passed over
        read_records(path)
    assert json.loads(path.read_text().splitlines()[2])["m"] == 7  # the new record whole, on its own line


def test_a_recording_file_that_cannot_be_written_warns_once_and_records_once_it_can(tmp_path):
    from polygemm.problem import normalize
    from polygemm.tuning import read_records, record, record_problem

    blocker = tmp_path / "d"
    blocker.write_text("a file where the folder should be")
    path = blocker / "calls.jsonl"
    problems = [normalize(np.zeros((m, 4), np.float32), np.zeros((4, 5), np.float32)) for m in (2, 3, 4)]
    with pytest.warns(RuntimeWarning, match="cannot record shapes") as said, record(path):
        for p in problems:
            record_problem(p)
    assert len([w for w in said if "cannot record shapes" in str(w.message)]) == 1
    blocker.unlink()
    blocker.mkdir()
    with record(path):
        for p in problems:
            record_problem(p)
    assert [r["m"] for r in read_records(path)] == [2, 3, 4]
