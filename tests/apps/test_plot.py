"""``polygemm plot`` and ``bench --plot``: records in, figures out."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest

import polygemm as pg
from polygemm.apps import bench
from polygemm.apps.cli import main

from tests.helpers import bench_record, cli, cli_error_line, kernel_bench_record, PLUGIN, without_modules
from tests.plugin_sources import install_fake_distribution


PLOT_INPUTS = {
    "truncated": '{"records": [',
    "not json": "not json at all",
    "a list": "[1, 2, 3]",
    "no records": "{}",
    "records of numbers": '{"records": [1, 2]}',
    "null": "null",
}


def _bench_json(tmp_path):
    path = tmp_path / "b.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "16x16x16", "--repeats", "1", "--no-progress",
                 "--json", str(path)]) == 0
    return json.loads(path.read_text())


def _rc(argv):
    """The exit status ``polygemm <argv>`` gives (main returns it, argparse raises it)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _records(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "32x32x32", "--repeats", "1", "--json", str(path),
                 "--no-progress"]) == 0
    capsys.readouterr()
    return path


def _bench_file(path: Path, *records: dict) -> Path:
    path.write_text(json.dumps({"command": "polygemm bench", "records": list(records)}))
    return path


def _no_vendor_plugin(tmp_path, monkeypatch, fresh_registry, name: str = "Dbl") -> None:
    install_fake_distribution(tmp_path, "pg_novendor", "pg_novendor_plugin", PLUGIN, {name: "pg_novendor_plugin:DoubleBackend"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()


def test_plot_output_empty_is_refused(tmp_path, capsys):
    records = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", str(records), "--no-progress"]) == 0
    capsys.readouterr()
    assert "--output '': an empty path" in cli_error_line(capsys, ["plot", str(records), "-o", ""])


def test_bench_says_which_files_it_wrote(tmp_path, capsys):
    # bench --json/--markdown/--plot says which files it wrote, as plot -o does ("wrote ..."), so a typo in a path
    # shows at once (polygemm/apps/bench.py)
    js, md = tmp_path / "b.json", tmp_path / "b.md"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--json", str(js), "--markdown", str(md),
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"wrote {js}, {md}"
    records = json.loads(js.read_text())["records"]
    assert len(records) == 1 and (records[0]["m"], records[0]["n"], records[0]["k"]) == (8, 8, 8)
    assert "8x8x8" in md.read_text().replace(" ", "") or "| 8 |" in md.read_text()
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress"]) == 0
    assert "wrote" not in capsys.readouterr().out  # no file, no such line


@pytest.mark.parametrize("kind", [*PLOT_INPUTS, "binary", "missing", "a folder"])
def test_plot_of_a_file_it_cannot_read_is_one_line_naming_the_file(tmp_path, capsys, kind):
    path = tmp_path / "records.json"
    if kind in PLOT_INPUTS:
        path.write_text(PLOT_INPUTS[kind])
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00\x01")
    elif kind == "a folder":
        path.mkdir()
    line = cli_error_line(capsys, ["plot", str(path), "-o", str(tmp_path / "p.png")])
    assert str(path) in line
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("field, value, says", [
    ("tflops", "fast", "a number"),
    ("m", "8", "a whole number"),
    ("m", 8.5, "a whole number"),
    ("m", True, "a whole number"),
    ("dtype", 5, "a string"),
    ("variant", ["a"], "a string"),
])
def test_plot_of_a_record_field_of_another_type_is_one_line_naming_it(tmp_path, capsys, field, value, says):
    # a record field of another type than bench writes is refused by load_records, naming it, before plot's sums and
    # sorts would fail on it (a TypeError traceback) or draw it (a label "Truex8x8")
    data = _bench_json(tmp_path)
    capsys.readouterr()
    bad = copy.deepcopy(data)
    bad["records"][0][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    for extra in ([], ["-o", str(tmp_path / "p.png")], ["--heatmap", "-o", str(tmp_path / "h.png")]):
        assert main(["plot", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert f"record 1 has {field}={value!r}" in err and says in err and "Traceback" not in err, err
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "h.png").exists()
    # the file as bench wrote it, and a figure left null (not measured), still read and plot
    data["records"][0]["vendor_tflops"] = None
    path.write_text(json.dumps(data))
    assert main(["plot", str(path), "-o", str(tmp_path / "ok.png")]) == 0
    assert (tmp_path / "ok.png").exists()


def test_readme_cli_commands_on_a_machine_without_a_gpu(tmp_path, capsys, monkeypatch):
    """README commands: 'polygemm gemm --shape ... --check' passes, exit 0; the GPU-only ones name the device
    that is unavailable, exit 2, and write nothing."""
    info = {i.name: i for i in pg.backends()}["cuda"]
    if info.available:
        pytest.skip("the cuda backend is available here")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    assert main(["gemm", "--shape", "64x64x64", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out
    for argv in (["bench", "--mode", "kernel", "--device", "cuda", "--dtype", "float32", "--variants", "all", "--shapes",
                  "square", "odd", "--json", "r.json", "--markdown", "r.md", "--plot", "r.png"],
                 ["ceiling"], ["gemm", "--shape", "64x64x64", "--device", "cuda"]):
        assert main(argv) == 2, argv
        assert "device 'cuda' is unavailable" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_plot_names_what_a_json_file_lacks(tmp_path, capsys):
    """``polygemm plot`` on JSON that is not a bench file says what it expected (not only "'records'", a KeyError's
    text), one line, exit 2."""
    from polygemm.apps.cli import main

    bad = tmp_path / "other.json"
    bad.write_text('{"command": "x"}')
    assert main(["plot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no 'records' list" in err and "polygemm bench --json" in err and "Traceback" not in err
    worse = tmp_path / "worse.json"
    worse.write_text('{"records": [1, 2]}')
    assert main(["plot", str(worse)]) == 2
    assert "not a list of objects" in capsys.readouterr().err


def test_plot_output_in_a_folder_where_no_file_can_be_made(capsys, tmp_path, no_file_folder):
    # as above, for polygemm plot -o
    rec = dict(backend="cpu", variant="blas", dtype="float32", m=64, n=64, k=64, tflops=0.01, tflops_min=0.009,
               tflops_max=0.011, ms=0.05, vendor_variant="numpy", vendor_tflops=0.012, ratio=0.8, device="CPU",
               date="2026-01-01", repeats=5, calls_per_repeat=1)
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src), "-o", f"{no_file_folder}/x.png"])
    assert rc == 2 and "Traceback" not in err and "no file can be made" in err, (rc, out, err)


@pytest.mark.parametrize("rec", [bench_record(), bench_record(tflops=None, tflops_min=None, tflops_max=None),
                                 bench_record(vendor_tflops=None, ratio=None), bench_record(repeats=0, calls_per_repeat=0)],
                         ids=["whole", "no-own-figure", "no-vendor", "zero-counts"])
def test_plot_of_hand_made_records_with_nulls_and_defaults(capsys, tmp_path, rec):
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src), "-o", str(tmp_path / "p.svg")])
    assert rc == 0 and "Traceback" not in err, err
    assert "float32, kernel mode" in out and (tmp_path / "p.svg").stat().st_size > 0


def test_plot_summary_counts_one_shape_in_the_singular(capsys, tmp_path):
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [bench_record()]}))
    rc, out, err = cli(capsys, ["plot", str(src)])
    assert rc == 0 and ": 1 shape, geometric mean" in out, (out, err)


def test_plot_records_lacking_a_field_name_it(capsys, tmp_path):
    rec = bench_record()
    del rec["vendor_tflops"], rec["date"]
    src = tmp_path / "r.json"
    src.write_text(json.dumps({"records": [rec]}))
    rc, out, err = cli(capsys, ["plot", str(src)])
    assert rc == 2 and "record 1 lacks 'vendor_tflops', 'date'" in err


def test_plot_output_without_matplotlib_names_the_option_given(tmp_path, capsys, monkeypatch):
    """``polygemm plot r.json -o r.png`` names -o, its own option, not bench's --plot."""
    records = _records(tmp_path, capsys)
    without_modules(monkeypatch, "matplotlib")
    rc = _rc(["plot", str(records), "-o", str(tmp_path / "r.png")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "-o/--output needs matplotlib" in err and "--plot" not in err, err
    assert "pip install 'polygemm[plot]'" in err
    assert not (tmp_path / "r.png").exists()


def test_bench_plot_without_matplotlib_is_refused_before_any_timing(tmp_path, capsys, monkeypatch):
    without_modules(monkeypatch, "matplotlib")
    rc = _rc(["bench", "--device", "cpu", "--shapes", "32x32x32", "--json", str(tmp_path / "r.json"),
              "--plot", str(tmp_path / "r.png"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--plot needs matplotlib" in err and "pip install 'polygemm[plot]'" in err
    assert list(tmp_path.iterdir()) == []


def test_bench_refuses_an_empty_product_before_timing(capsys):
    # --shapes 0x8x8 is a product of no arithmetic (0 FLOP/s, a ratio of nothing, log2(0) for --plot): refused before
    # timing
    assert main(["bench", "--device", "cpu", "--shapes", "0x8x8", "8x8x8"]) == 2
    captured = capsys.readouterr()
    assert "--shapes 0x8x8: a product with a zero dimension" in captured.err
    assert "polygemm bench:" not in captured.out  # nothing timed


def test_plot_leaves_out_records_of_empty_products(tmp_path, capsys):
    # a file may hold such a record (an older bench wrote them): plot leaves it out, saying so, where its log would be
    # a "math domain error"
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", kernel_bench_record(m=0), kernel_bench_record(), kernel_bench_record(m=128, n=128, k=128))
    out = tmp_path / "r.png"
    assert main(["plot", str(f), "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    assert "left out 1 record of an empty product (0x64x64)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["plot", "bench"])
def test_a_plot_path_matplotlib_cannot_write_is_refused_up_front(tmp_path, capsys, command, monkeypatch):
    # -o r.txt is refused up front, not matplotlib's "Format 'txt' is not supported" traceback (in bench, after all
    # the timing)
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed before refusing the path"))
    f = _bench_file(tmp_path / "r.json", kernel_bench_record())
    argv = ["plot", str(f), "-o", str(tmp_path / "r.txt")] if command == "plot" else \
        ["bench", "--device", "cpu", "--shapes", "8x8x8", "--plot", str(tmp_path / "r.txt")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "r.txt: matplotlib cannot write '.txt' files" in err and ".png" in err and "Traceback" not in err


def test_plot_output_without_an_extension_is_written_where_it_says(tmp_path, capsys):
    # "-o chart" writes the file named chart, where matplotlib alone would write chart.png
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", kernel_bench_record(), kernel_bench_record(m=128, n=128, k=128))
    assert main(["plot", str(f), "-o", str(tmp_path / "chart")]) == 0
    assert (tmp_path / "chart").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "chart.png").exists()


def test_plot_heatmap_without_vendor_timings_is_an_error_not_a_traceback(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    f = _bench_file(tmp_path / "r.json", kernel_bench_record(vendor_tflops=None, ratio=None, vendor_variant=""))
    assert main(["plot", str(f), "--heatmap", "-o", str(tmp_path / "h.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("polygemm: error:") and "no benchmark record with a vendor timing" in err


def test_plot_names_the_fields_a_record_lacks(tmp_path, capsys):
    # not "BenchRecord.__init__() missing 16 required positional arguments: ..."
    f = tmp_path / "other.json"
    f.write_text(json.dumps({"records": [{"m": 4, "impl": "x"}]}))
    assert main(["plot", str(f)]) == 2
    err = capsys.readouterr().err
    assert "__init__" not in err and "record 1 lacks 'backend', 'variant', 'dtype'" in err and "polygemm bench --json" in err


def test_bench_records_without_a_vendor_are_strict_json(tmp_path, monkeypatch, fresh_registry, capsys):
    # a backend without a vendor variant writes null into --json (NaN is not JSON: jq and JavaScript refuse it),
    # prints no "(nanx None)", and heads its run with the entry point's own spelling ("Auto2", not "auto2")
    _no_vendor_plugin(tmp_path, monkeypatch, fresh_registry)
    try:
        out = tmp_path / "r.json"
        assert main(["bench", "--device", "dbl", "--mode", "kernel", "--shapes", "8x8x8", "--json", str(out), "--no-progress"]) == 0
        text = capsys.readouterr().out
        assert "nanx" not in text and "None" not in text and "no vendor variant" in text
        assert text.startswith("polygemm bench: Dbl float32")
        data = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
        rec = data["records"][0]
        assert rec["vendor_tflops"] is None and rec["ratio"] is None and rec["tflops"] > 0
        loaded = bench.load_records(str(out))[0]
        assert loaded.vendor_tflops != loaded.vendor_tflops and loaded.ratio != loaded.ratio  # back to nan
        assert main(["plot", str(out)]) == 0
    finally:
        sys.modules.pop("pg_novendor_plugin", None)


def test_plot_heatmap_whose_worst_shape_is_transposed_lists_it_beside_the_grid(tmp_path, capsys):
    """Four nn shapes at one K make a grid; the worst, a :tn shape at that K, is drawn beside it, not looked up in the
    grid (where it has no cell, or would box the nn cell of the same M and N)."""
    pytest.importorskip("matplotlib")
    grid = [kernel_bench_record(mode="call", m=m, n=n, k=16, ratio=1.0, layout="nn") for m in (64, 128) for n in (64, 128)]
    worst = kernel_bench_record(mode="call", m=32, n=48, k=16, ratio=0.3, layout="tn")
    f = _bench_file(tmp_path / "r.json", *grid, worst)
    assert main(["plot", str(f), "--heatmap", "-o", str(tmp_path / "h.png")]) == 0
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"
    assert "worst 0.30x at 32x48x16:tn" in capsys.readouterr().out


def test_plot_refuses_to_draw_over_a_file_it_reads(tmp_path, capsys):
    """plot r.svg -o r.svg (records saved under an image's name) would replace the records with the chart: refused,
    the file kept; so is --heatmap with no -o to draw it in."""
    records = _records(tmp_path, capsys)
    saved = tmp_path / "r.svg"
    saved.write_bytes(records.read_bytes())
    line = cli_error_line(capsys, ["plot", str(records), str(saved), "-o", str(saved)])
    assert "-o/--output" in line and "one of the record files read" in line
    assert saved.read_bytes() == records.read_bytes()
    assert "--heatmap" in cli_error_line(capsys, ["plot", str(records), "--heatmap"])
