"""``polygemm bench --shapes real`` and shapes with a layout (``MxNxK:nt``): the preset's
contents, the operands bench builds in each layout, records, usage errors, the CPU refusal."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps import bench, bench_call
from polygemm.apps.bench_layout import Shape, layout_of
from polygemm.apps.bench_real import MAX_OUTPUT_ELEMENTS, REAL_WORKLOADS, TOKENS
from polygemm.apps.cli import main

from tests.helpers import cli, cli_error_line

REAL = bench.PRESETS["real"]


def test_real_preset_parses_with_a_layout_for_every_product():
    assert bench.parse_shapes(["real"]) == REAL
    assert 80 <= len(REAL) <= 110 and len(set(REAL)) == len(REAL)
    assert all(isinstance(s, Shape) and s.layout in ("nn", "nt", "tn", "tt") for s in REAL)
    assert {s.layout for s in REAL} >= {"nn", "nt", "tn"}  # weights stored [N, K] and [K, N], weight gradients
    assert max(m * n for m, n, k in REAL) <= MAX_OUTPUT_ELEMENTS  # no output over 1 GiB of float16


def test_real_preset_covers_every_token_count_and_projection():
    labels = [label for label, _ in REAL_WORKLOADS]
    for t in TOKENS:  # each T with each projection kind (Llama-3 8B at every T)
        for kind in ("QKV", "O", "gate+up", "down"):
            assert f"Llama-3 8B {kind} T={t}" in labels
    for what in ("Llama-3 70B", "Mixtral 8x7B expert", "Mixtral 8x7B router", "Qwen2.5-7B", "LM head", "BERT-base",
                 "ResNet-50 conv1", "ResNet-50 fc", "primes", "long K"):
        assert any(what in label for label in labels), what
    by_label = dict(REAL_WORKLOADS)
    assert by_label["Llama-3 8B gate+up T=16384"] == Shape(16384, 28672, 4096, "nt")  # x @ W.T, an nn.Linear weight
    assert by_label["Mixtral 8x7B expert w1/w3 T=4096"] == Shape(1024, 14336, 4096, "nt")  # top-2 of 8: T/4 tokens
    assert by_label["Mixtral 8x7B expert w1/w3 T=1"][0] == 1
    assert not any("LM head T=4096" in label for label in labels)  # the heads are sampled at T ≤ 1024
    assert Shape(512, 2, 500000, "tn") in REAL and Shape(401408, 64, 147, "nt") in REAL


def test_shape_is_its_triple_with_a_layout():
    s = Shape(4096, 6144, 4096, "nt")
    m, n, k = s
    assert (m, n, k) == (4096, 6144, 4096) and max(s) == 6144 and s.trans_b and not s.trans_a
    assert s != (4096, 6144, 4096) and (4096, 6144, 4096) != s  # another problem than the plain triple
    assert Shape(8, 8, 8) == (8, 8, 8) and hash(Shape(8, 8, 8)) == hash((8, 8, 8)) and layout_of((8, 8, 8)) == "nn"
    assert len({Shape(8, 8, 8, "nt"), Shape(8, 8, 8, "tn"), (8, 8, 8), Shape(8, 8, 8)}) == 3
    assert pickle.loads(pickle.dumps(s)).layout == "nt"
    with pytest.raises(ValueError, match="nn, nt, tn, tt"):
        Shape(1, 2, 3, "xt")


def test_shapes_with_a_layout_parse_beside_plain_ones():
    shapes = bench.parse_shapes(["8x8x8:nt,5x7x3:TT", "8x8x8", "8x8x8:nn", "8x8x8:nt"])
    assert shapes == [Shape(8, 8, 8, "nt"), Shape(5, 7, 3, "tt"), (8, 8, 8)]
    assert [layout_of(s) for s in shapes] == ["nt", "tt", "nn"]


@pytest.mark.parametrize("spec, says", [(":xx", "MxNxK"), ("4x4x4:", "no layout"), ("4x4x4:xx", "'xx'"),
                                        ("4x4x4:ntn", "'ntn'"), ("4x4:nt", "MxNxK")])
def test_bad_layout_specs_are_usage_errors_naming_the_form(capsys, spec, says):
    line = cli_error_line(capsys, ["bench", "--device", "cpu", "--shapes", spec, "--repeats", "1"])
    assert says in line and "MxNxK:LAYOUT" in line and "nn, nt, tn or tt" in line


def _shrunk(shape: Shape) -> Shape:
    """The product in the same layout at a size a test multiplies in microseconds (M = 1 kept: a decode step's row)."""
    m, n, k = shape
    return Shape(min(m, 5), min(n, 6), min(k, 7), shape.layout)


def _libs(monkeypatch, handed: list[tuple[str, np.ndarray, np.ndarray]]) -> None:
    """Call mode as on a GPU: polygemm timed on "cupy" arrays beside "torch" and "cupy" vendors, each library's
    ``to_device`` a C-ordered copy (as a device copy of a host array is) and its transpose a view; every call's A
    and B are logged as (who, a, b), polygemm's computed on the cpu backend."""
    def lib(name: str) -> bench_call.ArrayLib:
        return bench_call.ArrayLib(name, lambda x: np.array(x, order="C"), lambda shape, dt: np.empty(shape, dt),
                                   lambda x: x.swapaxes(-1, -2))

    libs = {"cupy": lib("cupy"), "torch": lib("torch")}
    vendors = []
    for name, owner in libs.items():
        def matmul(a, b, out, name=name):
            handed.append((name, a, b))
            return np.matmul(a, b, out=out)

        vendors.append(bench_call.Vendor(name, owner, matmul, f"{name}.matmul(a, b, out=out)", matmul, ""))
    real_gemm = bench_call.gemm

    def gemm(a, b, **kw):
        handed.append(("polygemm", a, b))
        kw["device"] = "cpu"
        return real_gemm(a, b, **kw)

    monkeypatch.setattr(bench_call, "call_setup", lambda be, dtype, prefer="auto": (libs["cupy"], vendors))
    monkeypatch.setattr(bench_call, "gemm", gemm)


def _strides_say(x: np.ndarray, trans: bool) -> bool:
    """Whether the matrix ``x`` (rows × cols) is laid out as its letter says: ``n`` C-ordered, ``t`` the transposed
    view of a C-ordered array (a column-major matrix)."""
    rows, cols = x.shape[-2:]
    want = (x.itemsize, rows * x.itemsize) if trans else (cols * x.itemsize, x.itemsize)
    return x.strides[-2:] == want


def test_every_real_products_layout_reaches_polygemm_and_the_vendors(monkeypatch):
    handed: list[tuple[str, np.ndarray, np.ndarray]] = []
    _libs(monkeypatch, handed)
    for layout in sorted({s.layout for s in REAL}):  # one run per layout: every call of it must be in it
        handed.clear()
        shapes = [_shrunk(s) for s in REAL if s.layout == layout]
        records = bench.run_call_bench("cpu", "float32", shapes, repeats=1, min_seconds=0.0)
        assert [(r.m, r.n, r.k, r.layout) for r in records] == [(*s, layout) for s in shapes]
        assert {who for who, _, _ in handed} == {"polygemm", "cupy", "torch"}
        wrong = [(who, a.strides, b.strides) for who, a, b in handed
                 if not (_strides_say(a, layout[0] == "t") and _strides_say(b, layout[1] == "t"))]
        assert not wrong, (layout, wrong[:3])


def test_each_layout_reaches_the_call_with_the_same_data_as_the_vendors(monkeypatch):
    handed: list[tuple[str, np.ndarray, np.ndarray]] = []
    _libs(monkeypatch, handed)
    for layout in ("nn", "nt", "tn", "tt"):
        handed.clear()
        rec, = bench.run_call_bench("cpu", "float32", [Shape(5, 7, 3, layout)], repeats=1, min_seconds=0.0, sets=1)
        assert rec.layout == layout
        ours = [(a, b) for who, a, b in handed if who == "polygemm"]
        theirs = [(a, b) for who, a, b in handed if who != "polygemm"]
        assert ours and theirs
        for a, b in ours + theirs:
            assert a.shape == (5, 3) and b.shape == (3, 7)
            assert _strides_say(a, layout[0] == "t") and _strides_say(b, layout[1] == "t"), (layout, a.strides, b.strides)
            # B = W.T: a view of a C-ordered [N, K] array, not a copy
            if layout[1] == "t":
                assert b.base is not None and b.swapaxes(-1, -2).flags.c_contiguous
            np.testing.assert_array_equal(a, ours[0][0])
            np.testing.assert_array_equal(b, ours[0][1])


def test_kernel_mode_times_each_layout(monkeypatch):
    seen = []
    real_gemm = pg.gemm

    def gemm(a, b, **kw):
        seen.append((a.strides, b.strides))
        return real_gemm(a, b, **kw)

    monkeypatch.setattr(pg, "gemm", gemm)
    recs = bench.run_bench("cpu", "float32", ["reference"], [Shape(5, 7, 3, "tn"), Shape(5, 7, 3, "nt")], repeats=1)
    assert [r.layout for r in recs] == ["tn", "nt"]
    assert (4, 20) in {a for a, _ in seen} and (4, 12) in {b for _, b in seen}  # A = (3x5).T, B = (7x3).T


def test_layout_round_trips_into_json_and_tables(tmp_path, capsys):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["bench", "--device", "cpu", "--shapes", "6x5x4:tn", "6x5x4", "--repeats", "1", "--json", str(js),
                 "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "6x5x4:tn" in out
    records = json.loads(js.read_text())["records"]
    assert [(r["m"], r["n"], r["k"], r["layout"]) for r in records] == [(6, 5, 4, "tn"), (6, 5, 4, "nn")]
    assert [r.layout for r in bench.load_records(str(js))] == ["tn", "nn"]
    table = md.read_text()
    assert "| layout |" in table and "| 6×5×4 | tn |" in table


def test_records_without_a_layout_read_as_nn_and_a_bad_one_is_refused(tmp_path):
    js = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "4x4x4", "--repeats", "1", "--json", str(js)]) == 0
    data = json.loads(js.read_text())
    del data["records"][0]["layout"]
    js.write_text(json.dumps(data))
    assert bench.load_records(str(js))[0].layout == "nn"
    data["records"][0]["layout"] = "nx"
    js.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="layout"):
        bench.load_records(str(js))


def test_tiny_run_with_layouts_checks_out_end_to_end(monkeypatch, tmp_path, capsys):
    checked = []
    real_gemm = bench_call.gemm

    def gemm(a, b, **kw):  # every timed call's result against the float64 product of what it was handed
        got = real_gemm(a, b, **kw)
        np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
        checked.append((a.shape, b.shape, a.flags.c_contiguous, b.flags.c_contiguous))
        return got

    monkeypatch.setattr(bench_call, "gemm", gemm)
    js = tmp_path / "r.json"
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8:nt", "5x7x3:tt", "--repeats", "1",
                                "--json", str(js)])
    assert rc == 0, err
    assert "8x8x8:nt" in out and "5x7x3:tt" in out
    assert ((8, 8), (8, 8), True, False) in checked and ((5, 3), (3, 7), False, False) in checked
    records = json.loads(js.read_text())["records"]
    assert [r["layout"] for r in records] == ["nt", "tt"] and all(r["ratio"] > 0 for r in records)


def test_real_preset_is_refused_on_the_cpu_naming_what_to_use(capsys, monkeypatch):
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed a GPU preset on the CPU"))
    line = cli_error_line(capsys, ["bench", "--device", "cpu", "--shapes", "real"])
    assert "GPU" in line and "--shapes cpu" in line and "--device cuda" in line and "--max-dim" in line
    line = cli_error_line(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8,real", "--mode", "kernel"])
    assert "real" in line and "GPU" in line


def test_max_dim_keeps_the_real_products_a_cpu_can_take(capsys, monkeypatch):
    timed = []
    monkeypatch.setattr(bench, "run_call_bench", lambda device, dtype, shapes, **k: timed.extend(shapes) or [])
    # the stand-in records nothing: exit 1, "nothing was timed"
    assert main(["bench", "--device", "cpu", "--shapes", "real", "--max-dim", "1100", "--repeats", "1"]) == 1
    assert timed == [s for s in REAL if max(s) <= 1100] and timed
    assert all(isinstance(s, Shape) for s in timed)
    assert "more above --max-dim 1100 left out" in capsys.readouterr().out


def test_a_transposed_batch_on_arrays_that_would_copy_it_is_refused(monkeypatch):
    # a backend's own arrays (no transpose of their own) copy a transposed batch C-ordered: the record would
    # claim a layout the call never read, so the run is refused naming the libraries that keep it
    lib = bench_call.ArrayLib("pycuda", lambda x: np.array(x, order="C"), lambda shape, dt: np.empty(shape, dt), None)
    vendor = bench_call.Vendor("cupy", lib, lambda a, b, out: np.matmul(a, b, out=out), "cupy.matmul(a, b, out=out)",
                               lambda a, b, out: np.matmul(a, b, out=out), "")
    monkeypatch.setattr(bench_call, "call_setup", lambda be, dtype, prefer="auto": (lib, [vendor]))
    monkeypatch.setattr(bench_call, "gemm", lambda a, b, **kw: pytest.fail("timed a layout it could not hold"))
    with pytest.raises(pg.UnsupportedProblemError, match=r"--batch with a transposed layout.*--array-lib cupy or torch"):
        bench.run_call_bench("cpu", "float32", bench.parse_shapes(["4x4x4:nt"]), repeats=1, min_seconds=0.0, batch=2)
