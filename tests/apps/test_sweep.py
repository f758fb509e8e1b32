"""The bench ``sweep`` preset, ``--repeats auto``, kernel mode's ``--variants auto``, the summary and heatmap."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import asdict

import numpy as np
import pytest

from polygemm.apps import bench
from polygemm.apps.cli import main

from tests.helpers import cli, REPO_ROOT, subprocess_env, usage_error


SWEEP = bench.PRESETS["sweep"]


def _record(m: int, n: int, k: int, ratio: float, **kw: object) -> bench.BenchRecord:
    base = dict(backend="cuda", variant="hgemm_v3_wgmma_pingpong", dtype="float16", m=m, n=n, k=k, tflops=100.0 * ratio,
                tflops_min=90.0 * ratio, tflops_max=110.0 * ratio, ms=1.0, vendor_variant="cublas", vendor_tflops=100.0, ratio=ratio,
                device="NVIDIA H200", date="2026-01-01T00:00:00+00:00", repeats=5, calls_per_repeat=10)
    base.update(kw)
    return bench.BenchRecord(**base)  # type: ignore[arg-type]


def _fake_sweep(path, dtype="float16"):
    """A small fake sweep file: kernel and call mode, three Ks, an odd shape."""
    recs = []
    for mode in ("kernel", "call"):
        extra = {} if mode == "kernel" else dict(vendor_variant="cupy", vendor_call="cupy.matmul(a, b, out=out)")
        for i, (m, n, k) in enumerate([(s, s, k) for k in (512, 4096) for s in (1, 16, 128, 4096)] + [(16, 4096, 16384), (4096, 16, 16384),
                                                                                                        (64, 64, 16384), (512, 512, 16384), (4095, 4097, 4093)]):
            recs.append(asdict(_record(m, n, k, 0.4 + 0.1 * i, dtype=dtype, mode=mode, requested="auto", **extra)))
    path.write_text(json.dumps({"command": "polygemm bench --shapes sweep", "records": recs}))
    return bench.load_records(str(path))


ROOT = REPO_ROOT


#: an impossible allocation on any machine: b is 10**14 float32 (400 TB, past a 47-bit address space), a one element
TOO_LARGE = "1x100000000000000x1"


def _sigint_default() -> None:
    # a child inherits an ignored SIGINT (a test run started in the background by a
    # non-interactive shell, as CI may be), and Python then never raises KeyboardInterrupt:
    # give the child the default disposition, as a terminal's Ctrl-C would find it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sweep_preset_size_and_no_duplicates():
    assert 48 <= len(SWEEP) <= 64
    assert len(set(SWEEP)) == len(SWEEP)
    assert bench.parse_shapes(["sweep"]) == SWEEP


def test_sweep_covers_every_m_and_n_against_each_k():
    for k in bench.SWEEP_K:
        at_k = [s for s in SWEEP if s[2] == k]
        assert {m for m, _, _ in at_k} >= set(bench.SWEEP_MN), f"K={k}: M values missing"
        assert {n for _, n, _ in at_k} >= set(bench.SWEEP_MN), f"K={k}: N values missing"
    assert bench.SWEEP_MN == (1, 16, 64, 128, 512, 1000, 4096, 8192) and bench.SWEEP_K == (512, 4096, 16384)


def test_sweep_has_skinny_both_ways_squares_deep_k_and_odd_sizes():
    for k in bench.SWEEP_K:  # skinny M against a long N and its mirror, at every K
        assert any(m <= 16 and n >= 4096 and kk == k for m, n, kk in SWEEP)
        assert any(n <= 16 and m >= 4096 and kk == k for m, n, kk in SWEEP)
    assert {(512, 512, 512), (4096, 4096, 4096)} <= set(SWEEP)  # squares
    assert sum(1 for m, n, k in SWEEP if k >= 16 * max(m, n)) >= 6  # K >> M, N
    odd = {(4095, 4097, 4093), (1000, 3000, 2000), (17, 4096, 4096), (4096, 17, 4096)}
    assert odd <= set(SWEEP)
    # the skinny and deep target shapes: a GEMV, a few rows, K far past M and N, a shallow K
    assert {(16, 4096, 4096), (512, 512, 16384), (8192, 8192, 512), (1, 8192, 8192)} <= set(SWEEP)


def test_sweep_help_names_the_axes_not_sixty_shapes(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "sweep (60 shapes: M, N in {1, 16, 64, 128, 512, 1000, 4096, 8192} against K in {512, 4096, 16384}" in out
    others = {s for name, shapes in bench.PRESETS.items() if name != "sweep" for s in shapes}
    only_sweep = [s for s in SWEEP if s not in others]
    assert only_sweep and not any("x".join(map(str, s)) in out for s in only_sweep)


def test_auto_repeats_many_for_tiny_few_for_large():
    assert bench.auto_repeats(1, 1, 512, 2) == 7
    assert bench.auto_repeats(4096, 4096, 4096, 2) == 5
    assert bench.auto_repeats(8192, 8192, 16384, 2) == 3
    assert bench.auto_repeats(8192, 8192, 16384, 4) == 3
    # 4-byte elements run at a fraction of the 16-bit rate: the same shape is "larger"
    assert bench.auto_repeats(4096, 4096, 4096, 4) <= bench.auto_repeats(4096, 4096, 4096, 2)
    # bandwidth counts: a GEMV with 8192x16384 operand is not "tiny"
    assert bench.auto_repeats(1, 8192, 16384, 4) < 7
    counts = [bench.auto_repeats(m, n, k, 2) for m, n, k in sorted(SWEEP, key=lambda s: s[0] * s[1] * s[2])]
    assert min(counts) >= 3 and counts[0] == 7 and counts[-1] == 3


def test_repeats_flag_rejects_words_other_than_auto():
    with pytest.raises(SystemExit):
        main(["bench", "--device", "cpu", "--repeats", "many"])


def test_bench_sweep_on_cpu_with_max_dim_and_auto(tmp_path, capsys):
    """The sweep's plumbing on the CPU: --max-dim keeps the small end, --repeats auto gives
    each shape its count, kernel mode's --variants auto records the rung auto ran."""
    js = tmp_path / "s.json"
    assert main(["bench", "--device", "cpu", "--mode", "kernel", "--variants", "auto", "--shapes", "sweep", "--max-dim", "512",
                 "--repeats", "auto", "--no-progress", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    kept = [s for s in SWEEP if max(s) <= 512]
    assert f"{len(kept)} shapes ({len(SWEEP) - len(kept)} more above --max-dim 512 left out)" in out
    recs = bench.load_records(str(js))
    assert [(r.m, r.n, r.k) for r in recs] == kept
    for r in recs:
        assert r.requested == "auto" and r.variant == "blas" and r.mode == "kernel"
        assert r.repeats == bench.auto_repeats(r.m, r.n, r.k, 4)
        assert r.ratio > 0 and r.vendor_variant == "numpy"
    assert "auto -> blas" in out


def test_normals_cyclic_from_a_random_start_never_zero():
    pool_len = bench.Normals.LENGTH
    normals = bench.Normals(np.random.default_rng(7), np.float16)
    x = normals((8192, 1024))
    assert x.dtype == np.float16 and x.shape == (8192, 1024)
    assert np.count_nonzero(x) > 0.99 * x.size and np.isfinite(x).all()
    assert 0.9 < float(x.astype(np.float32).std()) < 1.1
    flat = x.ravel()
    assert np.array_equal(flat[pool_len:2 * pool_len], flat[:pool_len])  # cyclic with the pool's period
    assert len({x[i, :16].tobytes() for i in range(x.shape[0])}) == x.shape[0]  # no two rows alike
    y = normals((8192, 1024))
    assert not np.array_equal(x, y)  # a second operand starts elsewhere
    small = normals((3, 5))
    assert small.shape == (3, 5) and np.count_nonzero(small) == 15


def test_summary_geomean_and_worst_shape():
    from polygemm.apps.plot import summarize

    recs = [
        _record(16, 4096, 4096, 0.5, variant="hgemm_v1_mma_ldmatrix"),
        _record(16, 4096, 4096, 0.8, variant="hgemm_v2_wgmma_tma"),  # the best rung of the shape counts
        _record(4096, 4096, 4096, 1.0),
        _record(512, 512, 16384, 0.25),
        _record(1, 1, 512, float("nan")),  # no vendor timing: left out
        _record(4096, 4096, 4096, 2.0, mode="call", vendor_variant="cupy", vendor_call="cupy.matmul(a, b, out=out)", requested="auto"),
        _record(1, 8192, 8192, 0.5, mode="call", vendor_variant="cupy", vendor_call="cupy.matmul(a, b, out=out)", requested="auto"),
    ]
    kernel, call = summarize(recs)
    assert (kernel.mode, kernel.dtype, call.mode) == ("kernel", "float16", "call")
    assert set(kernel.ratios) == {(16, 4096, 4096, 0, "nn"), (4096, 4096, 4096, 0, "nn"), (512, 512, 16384, 0, "nn")}
    assert kernel.ratios[(16, 4096, 4096, 0, "nn")] == 0.8 and kernel.variants[(16, 4096, 4096, 0, "nn")] == "hgemm_v2_wgmma_tma"
    assert kernel.geomean == pytest.approx((0.8 * 1.0 * 0.25) ** (1 / 3))
    assert kernel.worst == (512, 512, 16384, 0, "nn") and kernel.worst_ratio == 0.25
    assert call.geomean == pytest.approx(1.0) and call.worst == (1, 8192, 8192, 0, "nn")
    line = kernel.line()
    assert "3 shapes" in line and f"geometric mean {kernel.geomean:.2f}x" in line and "worst 0.25x at 512x512x16384" in line
    assert "cublas" in line and "cupy.matmul" in call.line() and "polygemm.gemm(auto)" in call.line()


def test_heatmap_renders_png_from_records(tmp_path):
    pytest.importorskip("matplotlib")
    from polygemm.apps.plot import plot_heatmap

    recs = _fake_sweep(tmp_path / "fake.json")
    png = tmp_path / "heat.png"
    summaries = plot_heatmap(recs, str(png))
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert [s.mode for s in summaries] == ["kernel", "call"]
    assert summaries[0].worst == (1, 1, 512, 0, "nn") and summaries[0].worst_ratio == pytest.approx(0.4)


def test_heatmap_panels_centre_at_one(tmp_path, monkeypatch):
    """One panel per K with at least four shapes plus the strip of the others; a diverging map
    whose midpoint is a ratio of 1.0; every ratio written in its cell."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from polygemm.apps import plot

    seen = {}
    real = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        seen["fig"] = fig
        return real(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda *a: None)
    recs = [r for r in _fake_sweep(tmp_path / "fake.json") if r.mode == "kernel"]
    plot.plot_heatmap(recs, str(tmp_path / "h.png"))
    axes = [ax for ax in seen["fig"].get_axes() if ax.images]
    titles = [ax.get_title() for ax in axes]
    assert titles == ["K = 512", "K = 4096", "K = 16384", "other shapes"]
    image = axes[0].images[0]
    assert image.norm(0.0) == pytest.approx(0.5)  # log2(1.0) sits at the map's centre
    assert image.get_cmap().name == "RdBu"
    texts = {t.get_text() for ax in axes for t in ax.texts}
    assert {f"{r.ratio:.2f}" for r in recs} <= texts
    assert axes[0].get_ylabel() == "M" and axes[0].get_xlabel() == "N"
    assert [t.get_text() for t in axes[3].get_yticklabels()] == ["4095×4097×4093"]


def test_plot_command_prints_summary_and_writes_heatmap(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    _fake_sweep(tmp_path / "a.json")
    png = tmp_path / "h.png"
    assert main(["plot", str(tmp_path / "a.json"), "--heatmap", "-o", str(png)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("float16, kernel mode: raw launch of auto's rung / cublas on NVIDIA H200: 13 shapes, geometric mean")
    assert "worst 0.40x at 1x1x512" in out[0] and out[1].startswith("float16, call mode: polygemm.gemm(auto) / cupy.matmul")
    assert png.read_bytes()[:4] == b"\x89PNG"
    # without -o: the summary alone; the throughput plot without --heatmap
    assert main(["plot", str(tmp_path / "a.json")]) == 0
    assert "geometric mean" in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "a.json"), "-o", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_command_refuses_unreadable_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["plot", str(bad)]) == 2
    assert "cannot read benchmark records" in capsys.readouterr().err


def test_bench_json_of_the_cpu_is_strict_json_and_exit_zero(tmp_path, capsys):
    """bench --device cpu --json writes strict JSON whose records say what ran."""
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "16x8x4", "--repeats", "1", "--no-progress", "--json", str(path)]) == 0
    data = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    (rec,) = data["records"]
    assert (rec["m"], rec["n"], rec["k"], rec["dtype"]) == (16, 8, 4, "float32") and rec["ms"] > 0 and rec["backend"] == "cpu"


@pytest.mark.parametrize("inputs", [[], ["--inputs", "numpy"]])
def test_bench_result_new_on_the_cpu_times_a_new_result_beside_a_matmul_operator(capsys, tmp_path, inputs):
    # the cpu backend's calls without out= (c = polygemm.gemm(a, b)) beside NumPy's own (c = a @ b)
    argv = ["bench", "--device", "cpu", "--shapes", "2x2x2", "--dtype", "float64", "--repeats", "1", "--no-progress", *inputs]
    assert main([*argv, "--result", "new", "--json", str(tmp_path / "r.json")]) == 0
    (rec,) = json.loads((tmp_path / "r.json").read_text())["records"]
    assert (rec["result"], rec["vendor_call"], rec["dtype"]) == ("new", "a @ b", "float64")
    assert "a @ b" in capsys.readouterr().out


def test_bench_too_large_from_a_shell_has_no_traceback(tmp_path):
    """As a first-time user runs it: one line on stderr, exit 2."""
    r = subprocess.run([sys.executable, "-m", "polygemm", "bench", "--device", "cpu", "--shapes", TOO_LARGE, "--repeats", "1"],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1 and "too large for this machine" in r.stderr


def test_bench_out_of_memory_while_timing_keeps_the_records_timed_before(tmp_path, capsys, monkeypatch):
    """Memory that runs out past the operands (a call's work arrays) ends the run in one line, exit 2, with the
    records timed before it written."""
    real = bench.run_call_bench

    def runs_out(device, dtype, shapes, **kw):  # 9x7x5 runs out of memory after 8x8x8 was timed
        records = real(device, dtype, [s for s in shapes if s != (9, 7, 5)], **kw)
        if (9, 7, 5) in shapes:
            raise MemoryError("Unable to allocate 3.6 TiB")
        return records

    monkeypatch.setattr(bench, "run_call_bench", runs_out)
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "9x7x5", "--repeats", "1", "--json", str(path),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("polygemm: error: out of host memory while timing (Unable to allocate 3.6 TiB)")
    assert err.endswith(f"the 1 record(s) timed before it written to {path}") and "Traceback" not in err
    assert [(r["m"], r["n"], r["k"]) for r in json.loads(path.read_text())["records"]] == [(8, 8, 8)]


@pytest.mark.parametrize("extra", [["--mode", "kernel", "--settle", "0.01", "--variants", "reference"],
                                   ["--batch", "2", "--inputs", "numpy"], ["--mode", "kernel", "--inputs", "device"]])
def test_bench_options_of_their_own_mode_still_run(capsys, tmp_path, extra):
    path = tmp_path / "r.json"
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress",
                                "--json", str(path), *extra])
    assert rc == 0, err
    recs = json.loads(path.read_text())["records"]
    assert recs and all(r["m"] == 8 for r in recs)
    if "--batch" in extra:
        assert all(r["batch"] == 2 for r in recs)
    if "--settle" in extra:
        assert all(r["method"] == "settled 0.01 s" for r in recs)


def test_bench_interrupted_keeps_what_it_timed_and_says_so(tmp_path):
    # Ctrl-C ends the sweep keeping every record timed so far, with no KeyboardInterrupt traceback
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    proc = subprocess.Popen([sys.executable, "-m", "polygemm", "bench", "--device", "cpu", "--mode", "kernel", "--shapes",
                             "32x32x32", "48x48x48", "2048x2048x2048", "--repeats", "50", "--no-progress", "--json", str(out),
                             "--markdown", str(md)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
                            cwd=str(ROOT), preexec_fn=_sigint_default)
    deadline = time.monotonic() + 90
    seen = ""
    assert proc.stdout is not None
    while time.monotonic() < deadline:  # wait for the small shapes' lines
        line = proc.stdout.readline()
        seen += line
        if seen.count("48x48x48 ") >= 2 or not line:
            break
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (seen + rest, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "interrupted" in err and str(out) in err
    data = json.loads(out.read_text())
    assert data.get("interrupted") is True
    shapes = {(r["m"], r["n"], r["k"]) for r in data["records"]}
    assert (32, 32, 32) in shapes and (48, 48, 48) in shapes
    assert "interrupted" in md.read_text()


def test_bench_with_good_variant_names_still_runs(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--variants", "blas,reference", "--repeats", "1",
                 "--json", str(out), "--no-progress"]) == 0
    assert {r["variant"] for r in json.loads(out.read_text())["records"]} == {"blas", "reference"}


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bench_repeats_below_one_is_a_usage_error_like_a_word(capsys, value):
    # --repeats 0 is argparse's usage error, as --repeats many is, not an error after the parser
    last = usage_error(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", value])
    assert last == f"polygemm bench: error: argument --repeats: must be an integer >= 1 or auto; got {value!r}"


def test_bench_variants_take_spaces_after_commas(capsys):
    # "--variants 'blas, numpy'" takes the space after the comma, as matrix does
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--variants", "blas, numpy",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "gemm(blas)" in out and "gemm(numpy)" in out


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_ceiling_repeats_must_be_a_positive_integer(capsys, value):
    # a count of 0 or less would time nothing
    line = usage_error(capsys, ["ceiling", "--repeats", value])
    assert "argument --repeats: must be an integer >= 1" in line, line


def test_two_layouts_of_one_size_are_two_shapes_and_stay_off_the_grid():
    from polygemm.apps.plot import summarize

    recs = [_record(4096, 4096, 4096, 1.0), _record(4096, 4096, 4096, 0.5, layout="nt")]
    (summary,) = summarize(recs)
    assert len(summary.ratios) == 2
    assert summary.worst == (4096, 4096, 4096, 0, "nt")
    assert "worst 0.50x at 4096x4096x4096:nt" in summary.line()
