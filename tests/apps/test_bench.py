"""``polygemm bench``: CPU defaults, options, records, progress, output files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps import bench, bench_call
from polygemm.apps.bench_timing import CallTimed
from polygemm.apps.cli import main
from polygemm.errors import UnsupportedProblemError

from tests.helpers import cli, kernel_bench_record, REPO_ROOT, usage_error


class FakeClock:
    """Seconds that pass only when told: each read advances ``tick`` (a batch's fixed cost), each fake call its own cost."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now, self.tick = 0.0, tick

    def __call__(self) -> float:
        now = self.now
        self.now += self.tick
        return now


def _costed(clock: FakeClock, costs: list[float], log: list[str], name: str):
    """A call that costs ``costs[i]`` seconds on its i-th run (the last cost repeated), logging its name."""
    runs = iter(costs)
    last = [costs[-1]]

    def call() -> None:
        last[0] = next(runs, last[0])
        clock.now += last[0]
        log.append(name)

    return call


class _FakeArray:
    def __init__(self, data: np.ndarray, lib: str) -> None:
        self.data, self.lib = data, lib

    def cuda(self) -> "_FakeArray":
        return self


def _fake_libs(monkeypatch, calls: list[tuple[str, bool]]) -> None:
    """torch and cupy modules whose matmul records whether out= was given."""
    def matmul_of(lib: str):
        def matmul(a, b, out=None):
            calls.append((lib, out is not None))
            return out

        return matmul

    cupy = types.ModuleType("cupy")
    cupy.asarray = lambda x: _FakeArray(np.asarray(x), "cupy")
    cupy.empty = lambda shape, dt: _FakeArray(np.empty(shape, dt), "cupy")
    cupy.matmul = matmul_of("cupy")
    torch = types.ModuleType("torch")
    torch.float32, torch.float16, torch.bfloat16, torch.int16 = "f32", "f16", "bf16", "i16"
    torch.from_numpy = lambda x: _FakeArray(x, "torch")
    torch.empty = lambda shape, dtype, device: _FakeArray(np.empty(shape, np.float32), "torch")
    torch.matmul = matmul_of("torch")
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "torch", torch)


_GPU = types.SimpleNamespace(name="cuda", residencies=("device",), variants=lambda: [], to_device=lambda x: x)


def _anchored(monkeypatch, cupy_costs: list[float]) -> None:
    """Call mode on the cpu backend beside two fake vendors named torch and cupy, on NumPy arrays, under a fake clock:
    a batch costs 1 ms plus its calls; polygemm's calls cost nothing, torch's 0.5 ms, cupy's ``cupy_costs[r]`` in
    repeat r (the last one for the rest; the first during the warm-up)."""
    clock = FakeClock(tick=1e-3)
    onces = [0]  # batches timed so far: three a repeat (torch, cupy, polygemm)

    class Timed(CallTimed):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, clock=clock, **kwargs)

        def once(self) -> float:
            try:
                return super().once()
            finally:
                onces[0] += 1

    numpy_lib = bench_call.ArrayLib("numpy", lambda x: x, lambda shape, dt: np.empty(shape, dt))
    fakes = []
    for name, costs in (("torch", [0.5e-3]), ("cupy", cupy_costs)):
        def matmul(a, b, out, costs=costs):
            np.matmul(a, b, out=out)
            clock.now += costs[min(onces[0] // 3, len(costs) - 1)]

        fakes.append(bench_call.Vendor(name, numpy_lib, matmul, f"{name}.matmul(a, b, out=out)", matmul,
                                       f"{name}.matmul(a, b, out=out)"))
    setup = lambda be, dtype, prefer="auto": (numpy_lib, fakes)  # noqa: E731
    monkeypatch.setattr(bench_call, "call_setup", setup)
    monkeypatch.setattr(bench, "call_setup", setup)  # (the command finds it once and hands it to each run)
    monkeypatch.setattr(bench_call, "CallTimed", Timed)


ROOT = REPO_ROOT


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in [extra.pop("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH", "")] if p)
    env = {**os.environ, "PYTHONPATH": path, **extra}
    env.pop("POLYGEMM_DEVICE", None)
    return env


def _polygemm(args: list[str], timeout: float, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "polygemm", *args], capture_output=True, text=True, env=_env(**env),
                       cwd=str(ROOT), timeout=timeout)
    return r, time.monotonic() - t0


def _record(**kw):
    base = dict(backend="cpu", variant="reference", dtype="float32", m=128, n=128, k=128, tflops=0.00026, tflops_min=0.0002,
                tflops_max=0.0003, ms=16.0, vendor_variant="numpy", vendor_tflops=0.00031, ratio=0.84, device="CPU (x86_64)",
                date="2026-01-01T00:00:00+00:00", repeats=3, calls_per_repeat=4)
    base.update(kw)
    return bench.BenchRecord(**base)


def _run_on_a_terminal(args: list[str]) -> str:
    """``python -m polygemm ARGS`` with stdout on a pseudo-terminal 100 columns wide."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "polygemm", *args], stdout=follower, stderr=subprocess.PIPE,
                            env=_env(), cwd=str(ROOT))
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    return b"".join(chunks).decode(errors="replace")


DOCS = ROOT / "docs" / "results"


#: an impossible allocation on any machine: b is 10**14 float32 (400 TB, past a 47-bit address space), a one element
TOO_LARGE = "1x100000000000000x1"


def test_interleaved_timing_takes_the_faster_vendor_and_the_range_of_the_ratios():
    clock, log = FakeClock(), []
    warm = [1.0] * 5  # one warm-up call, then the four of the probe sizing the batch (one call per batch here)
    ours = CallTimed([_costed(clock, warm + [10.0, 10.0, 10.0], log, "ours")], lambda: None, 0.0, clock=clock)
    torch = CallTimed([_costed(clock, warm + [12.0, 9.0, 15.0], log, "torch")], lambda: None, 0.0, clock=clock)
    cupy = CallTimed([_costed(clock, warm + [11.0, 11.0, 13.0], log, "cupy")], lambda: None, 0.0, clock=clock)
    del log[:]
    t = bench.time_interleaved(ours, {"torch": torch, "cupy": cupy}, repeats=3)
    assert log == ["torch", "cupy", "ours"] * 3  # every vendor beside polygemm, repeat by repeat
    assert t.ours == [10.0, 10.0, 10.0] and t.vendors == {"torch": [12.0, 9.0, 15.0], "cupy": [11.0, 11.0, 13.0]}
    assert t.fastest() == "cupy"  # by median: 11 against torch's 12, though torch had the single fastest repeat
    lo, hi, spread = bench.ratio_range(t.vendors["cupy"], t.ours)
    assert (lo, hi) == pytest.approx((1.1, 1.3)) and spread == pytest.approx(0.2 / 1.1)


def test_ratio_range_without_vendor_timings_is_not_measured():
    assert all(x != x for x in bench.ratio_range([], [1.0, 2.0]))


def test_cuda_call_mode_times_torch_and_cupy_where_installed_with_out(monkeypatch):
    calls: list[tuple[str, bool]] = []
    _fake_libs(monkeypatch, calls)
    lib, vendors = bench.call_setup(_GPU, "float32")
    assert lib.name == "cupy" and [v.name for v in vendors] == ["torch", "cupy"]
    assert [v.call for v in vendors] == ["torch.matmul(a, b, out=out)", "cupy.matmul(a, b, out=out)"]
    for v in vendors:
        a = v.lib.to_device(np.ones((2, 2), np.float32))
        v.matmul(a, a, v.lib.empty((2, 2), np.float32))
    assert calls == [("torch", True), ("cupy", True)]  # out= given, as polygemm's call is timed with it
    assert bench.call_setup(_GPU, "float32", "torch")[0].name == "torch"  # --array-lib: polygemm's arrays only
    # bfloat16: CuPy has none, so torch alone is the anchor
    lib, vendors = bench.call_setup(_GPU, "bfloat16")
    assert lib.name == "torch" and [v.name for v in vendors] == ["torch"]


def test_cuda_call_mode_without_cupy_anchors_on_torch_and_says_so_for_array_lib_cupy(monkeypatch):
    _fake_libs(monkeypatch, [])
    monkeypatch.setitem(sys.modules, "cupy", None)  # not installed: its import fails
    lib, vendors = bench.call_setup(_GPU, "float32")
    assert lib.name == "torch" and [v.name for v in vendors] == ["torch"]
    with pytest.raises(UnsupportedProblemError, match="cupy.*not importable"):
        bench.call_setup(_GPU, "float32", "cupy")


def test_call_record_carries_each_vendor_and_the_ratio_to_the_faster(monkeypatch):
    _anchored(monkeypatch, [0.2e-3])
    lines: list[str] = []
    rec, = bench.run_call_bench("cpu", "float32", [(8, 8, 8)], repeats=3, min_seconds=0.0, progress=lines.append)
    # two calls per batch (two input sets): polygemm 1 ms / 2, cupy (1 + 0.4) ms / 2, torch (1 + 1) ms / 2
    assert rec.us_per_call == pytest.approx(500.0)
    assert rec.torch_us_per_call == pytest.approx(1000.0) and rec.cupy_us_per_call == pytest.approx(700.0)
    assert rec.vendor == "cupy" and rec.vendor_us_per_call == pytest.approx(700.0) and rec.ratio == pytest.approx(1.4)
    assert rec.vendor_call.startswith("cupy.matmul") and rec.ratio_min == pytest.approx(1.4) == rec.ratio_max
    assert "1.40x cupy.matmul" in lines[0] and "1.40-1.40x over the repeats" in lines[0] and "torch 1000.0 us" in lines[0]


def test_bench_reports_the_spread_and_warns_once_when_it_is_wide(monkeypatch, tmp_path, capsys):
    _anchored(monkeypatch, [0.2e-3, 0.6e-3, 0.2e-3])  # cupy's second repeat slower: its ratio 2.2 against 1.4
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "3", "--json", str(js), "--markdown", str(md)]) == 0
    out, err = capsys.readouterr()
    assert "over the repeats" in out and "(wide)" in out
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "10%" in warnings[0] and "8x8x8" in warnings[0] and "repeats" in warnings[0]
    data = json.loads(js.read_text())
    rec, = data["records"]
    assert rec["vendor"] == "cupy" and rec["ratio_max"] > rec["ratio"] >= rec["ratio_min"] and rec["ratio_spread"] > 0.1
    assert {"us_per_call", "torch_us_per_call", "cupy_us_per_call", "vendor_us_per_call"} <= set(rec)
    assert data["warnings"] and "10%" in data["warnings"][0]
    text = md.read_text()
    assert "torch.matmul µs/call" in text and "cupy.matmul µs/call" in text and "ratio range" in text
    assert "(wide)" in text and "WARNING" in text.upper()
    assert bench.load_records(str(js))[0].vendor == "cupy"  # what bench writes, plot reads back


def test_quiet_ratios_carry_no_warning(monkeypatch, tmp_path, capsys):
    _anchored(monkeypatch, [0.2e-3])
    js = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "3", "--json", str(js)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "warnings" not in json.loads(js.read_text())


def test_cpu_records_leave_the_gpu_vendors_null(tmp_path):
    js = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "16x16x16", "--repeats", "2", "--json", str(js)]) == 0
    rec, = json.loads(js.read_text())["records"]
    assert rec["torch_us_per_call"] is None and rec["cupy_us_per_call"] is None
    assert rec["vendor"] == "numpy" and rec["vendor_us_per_call"] > 0 and rec["ratio_min"] <= rec["ratio_max"]


def test_kernel_mode_records_the_spread_of_its_ratios(tmp_path):
    js = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--mode", "kernel", "--variants", "blas", "--shapes", "16x16x16", "--repeats", "2",
                 "--json", str(js)]) == 0
    rec, = json.loads(js.read_text())["records"]
    assert rec["ratio_min"] <= rec["ratio"] * 1.0001 and rec["ratio_max"] >= rec["ratio_min"] and rec["ratio_spread"] >= 0


@pytest.fixture
def plotted(monkeypatch):
    """The axes of the last figure polygemm.apps.plot saved: {"ax": Axes}, kept open to be read."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        seen["ax"] = fig.axes[0]
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda *a: None)
    return seen


def test_plot_draws_each_vendor_library_timed_beside_the_call(plotted, tmp_path):
    from polygemm.apps import plot

    seen = plotted
    base = dict(backend="cuda", variant="x", dtype="float32", tflops=40.0, tflops_min=39.0, tflops_max=41.0, ms=0.05,
                vendor_variant="cupy", vendor_tflops=45.0, ratio=0.9, device="GPU", date="d", repeats=3, calls_per_repeat=10,
                mode="call", us_per_call=50.0, vendor_us_per_call=45.0, vendor_call="cupy.matmul(a, b, out=out)",
                requested="auto", torch_us_per_call=48.0, cupy_us_per_call=45.0, vendor="cupy")
    recs = [bench.BenchRecord(**base, m=s, n=s, k=s) for s in (1024, 2048)]
    plot.plot_records(recs, str(tmp_path / "v.png"))
    lines = {ln.get_label(): ln for ln in seen["ax"].get_lines()}
    assert "torch.matmul (vendor)" in lines and "cupy.matmul (vendor)" in lines
    assert lines["torch.matmul (vendor)"].get_linestyle() != lines["cupy.matmul (vendor)"].get_linestyle()


def test_array_lib_names_what_another_device_backend_takes(monkeypatch):
    _fake_libs(monkeypatch, [])
    other = types.SimpleNamespace(name="musa", residencies=("device",), variants=lambda: [], to_device=lambda x: x)
    with pytest.raises(UnsupportedProblemError, match="musa.*own device arrays.*omit --array-lib"):
        bench.call_setup(other, "float32", "torch")


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_bench_cpu_with_defaults_runs_the_cpu_preset(mode, capsys):
    """``polygemm bench --device cpu`` with every default (call mode), and kernel mode: the
    ``cpu`` preset (no 8192-sized shape), with CPU wording and units."""
    args = ["bench", "--device", "cpu"] + (["--mode", "kernel"] if mode == "kernel" else [])
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, out[-2000:] + err[-2000:]
    assert "preset cpu" in out and "8192" not in out
    for m, n, k in bench.PRESETS["cpu"]:
        assert f"{m}x{n}x{k} " in out
    assert "GFLOP/s" in out and " 0.00 TFLOP/s" not in out
    low = out.lower()
    assert "copies" not in low and "copy" not in low and "compil" not in low and "device synchron" not in low
    assert "\r" not in out and "%|" not in out  # stdout is no terminal: plain lines, no bar


def test_bench_plot_without_matplotlib_fails_fast_before_timing(tmp_path):
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('No module named matplotlib (simulated)')\n")
    png = tmp_path / "x.png"
    r, _ = _polygemm(["bench", "--device", "cpu", "--plot", str(png)], timeout=60, PYTHONPATH=str(fake))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "pip install 'polygemm[plot]'" in r.stderr and "matplotlib" in r.stderr
    # before timing: no intro line, no result line (what the output says, not a wall-clock bound on a shared machine)
    assert "polygemm bench:" not in r.stdout and "GFLOP/s" not in r.stdout and "us/call" not in r.stdout
    assert not png.exists()


def test_default_shapes_per_device():
    from polygemm import get_backend

    assert bench.default_shapes(get_backend("cpu")) == ["cpu"]
    gpu = types.SimpleNamespace(residencies=("host", "cuda"))
    assert bench.default_shapes(gpu) == ["square"]  # type: ignore[arg-type]
    emulated = types.SimpleNamespace(residencies=("host", "musa"), flavor=lambda: "host")
    assert bench.default_shapes(emulated) == ["cpu"]  # type: ignore[arg-type]
    real = types.SimpleNamespace(residencies=("host", "musa"), flavor=lambda: "musa")
    assert bench.default_shapes(real) == ["square"]  # type: ignore[arg-type]
    cubes = [s for s in bench.PRESETS["cpu"] if s[0] == s[1] == s[2]]
    assert max(s[0] for s in cubes) <= 512 and any(not (m == n == k) for m, n, k in bench.PRESETS["cpu"])


def test_bench_help_names_the_cpu_preset_and_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "cpu (64³..512³, 255x257x129)" in out
    assert "Default: square on a GPU (cuda, musa), cpu on the CPU" in out
    assert "--no-progress" in out and "(default: None)" not in out


def test_markdown_keeps_cpu_figures_in_gflops():
    md = bench.to_markdown([_record(), _record(m=64, n=64, k=64, tflops=0.0212, vendor_tflops=0.0472)], "polygemm bench --device cpu")
    assert "GFLOP/s (ratio to numpy" in md
    assert "0.26 (0.84×)" in md and "21.2 (0.84×)" in md and "| 0.31 |" in md
    assert "0.0 (" not in md and "| 0.0 |" not in md
    gpu = bench.to_markdown([_record(backend="cuda", tflops=512.3, vendor_tflops=650.0, vendor_variant="cublas")], "x")
    assert "TFLOP/s (ratio to cublas" in gpu and "512.3 (0.84×)" in gpu  # GPU tables in TFLOP/s


def test_call_markdown_headers_carry_no_wrong_unit():
    rec = _record(mode="call", vendor_variant="numpy", vendor_call="numpy.matmul(a, b, out=out)", inputs="numpy",
                  us_per_call=16000.0, vendor_us_per_call=15000.0, requested="auto")
    md = bench.to_markdown([rec], "polygemm bench --device cpu")
    assert "0.26 GFLOP/s" in md and "| TFLOP/s |" not in md
    assert "device synchron" not in md and "cop" not in md.split("###")[0].lower()


def test_kernel_progress_lines_use_gflops_where_tflops_would_round_to_zero():
    lines: list[str] = []
    recs = bench.run_bench("cpu", "float32", ["reference"], [(16, 16, 16)], repeats=1, progress=lines.append)
    assert recs and recs[0].tflops < 0.1
    assert any("GFLOP/s" in ln for ln in lines) and not any("0.00 TFLOP/s" in ln for ln in lines)


def test_steps_count_every_problem():
    ticks: list[int] = []
    bench.run_bench("cpu", "float32", "all", [(8, 8, 8), (9, 7, 5)], repeats=1, step=lambda: ticks.append(1))
    from polygemm import get_backend

    n = len([v for v in get_backend("cpu").variants() if "float32" in v.dtypes and not v.vendor])
    assert len(ticks) == 2 * n
    ticks.clear()
    recs = bench.run_call_bench("cpu", "float32", [(8, 8, 8), (9, 7, 5)], repeats=1, step=lambda: ticks.append(1))
    assert len(ticks) == 2 and all(r.requested == "auto" and r.mode == "call" for r in recs)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_bar_on_a_terminal_only_and_not_with_no_progress():
    pytest.importorskip("tqdm")
    shapes = ["--shapes", "8x8x8", "9x7x5", "--repeats", "1"]
    out = _run_on_a_terminal(["bench", "--device", "cpu", *shapes])
    assert "bench cpu:" in out and "/2 [" in out and "%|" in out and "\r" in out
    assert "8x8x8 gemm(auto)" in out and "9x7x5 gemm(auto)" in out  # the result lines stay
    plain = _run_on_a_terminal(["bench", "--device", "cpu", "--no-progress", *shapes])
    assert "bench cpu:" not in plain and "%|" not in plain
    assert "8x8x8 gemm(auto)" in plain


def test_no_bar_without_tqdm_or_rich(monkeypatch, capsys):
    """Neither library importable: the plain lines, as when stdout is not a terminal."""
    import builtins

    real_import = builtins.__import__

    def no_bars(name, *a, **k):
        if name.split(".")[0] in ("tqdm", "rich"):
            raise ImportError(f"No module named {name!r} (simulated)")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_bars)
    with bench.Progress(3, "bench cpu", bar=True) as prog:
        assert not prog.active
        prog.line("a result")
        prog.step()
    assert capsys.readouterr().out == "a result\n"


def test_gemm_on_the_cpu_says_nothing_of_copies_or_compilation(capsys):
    assert main(["gemm", "--shape", "32x16x8", "--device", "cpu"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("time:")][0]
    assert "(first call)" in line and "GFLOP/s" in line
    assert "cop" not in line and "compil" not in line and "device" not in line


def test_gemm_on_a_device_backend_names_the_copies(monkeypatch, capsys):
    from polygemm import registry
    from polygemm.apps import cli

    real = registry.get_backend("cpu")
    gpu_like = types.SimpleNamespace(name="cpu", residencies=("host", "gpu"), timer=real.timer)
    monkeypatch.setattr(cli.registry, "get_backend", lambda name: gpu_like)
    assert main(["gemm", "--shape", "32x16x8", "--device", "cpu"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("time:")][0]
    assert "first call, includes one-time setup and host<->device copies" in line
    assert "including host<->device copies" in line


def test_load_records_reads_what_bench_writes(tmp_path):
    js = tmp_path / "b.json"
    assert main(["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--repeats", "1", "--json", str(js)]) == 0
    recs = bench.load_records(str(js))
    raw = json.loads(js.read_text())["records"]
    assert [r.__dict__ for r in recs] == raw
    # older files lack the newer keys; unknown keys are ignored
    old = [{k: v for k, v in raw[0].items() if k not in ("mode", "requested", "inputs")} | {"future_key": 1}]
    (tmp_path / "old.json").write_text(json.dumps({"command": "x", "records": old}))
    back = bench.load_records(str(tmp_path / "old.json"))
    assert back[0].mode == "kernel" and back[0].m == 8


@pytest.mark.parametrize("name", ["h200-ladders", "h100-real-float16", "h100-real-float32", "h100-real-float64"])
def test_committed_benchmark_json_loads_and_plots(tmp_path, name):
    path = DOCS / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path.name} is not in this checkout")
    pytest.importorskip("matplotlib")
    from polygemm.apps.plot import plot_records

    recs = bench.load_records(str(path))
    assert recs and all(r.tflops_min <= r.tflops <= r.tflops_max for r in recs)
    png = tmp_path / f"{name}.png"
    plot_records(recs, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_axes_from_zero_labelled_numeric_with_error_bars(tmp_path, plotted):
    from polygemm.apps import plot

    seen = plotted
    recs = [_record(m=s, n=s, k=s, tflops=t, tflops_min=t * 0.9, tflops_max=t * 1.1, vendor_tflops=t * 1.2)
            for s, t in ((64, 0.02), (128, 0.03), (256, 0.05))] + [_record(m=255, n=257, k=129, tflops=0.01, tflops_min=0.009, tflops_max=0.012)]
    plot.plot_records(recs, str(tmp_path / "k.png"))
    ax = seen["ax"]
    assert ax.get_ylim()[0] == 0
    assert ax.get_ylabel().startswith("GFLOP/s") and "problem size" in ax.get_xlabel()
    assert ax.get_xscale() == "log"  # a numeric size axis, not categories
    labels = ax.get_legend_handles_labels()[1]
    assert "numpy (vendor)" in labels and "reference" in labels
    assert ax.containers, "min-max error bars are drawn"
    vendor = [ln for ln in ax.get_lines() if ln.get_label() == "numpy (vendor)"][0]
    assert vendor.get_marker() not in (None, "None", "") and vendor.get_linewidth() >= 2.5

    calls = [_record(mode="call", variant=v, requested="auto", vendor_variant="cupy", vendor_call="cupy.matmul(a, b, out=out)",
                     inputs="device", m=s, n=s, k=s, tflops=t, tflops_min=t * 0.95, tflops_max=t * 1.05, vendor_tflops=t * 1.1)
             for s, t, v in ((1024, 100.0, "v2"), (2048, 400.0, "v2"), (4096, 600.0, "v1"))]
    plot.plot_records(calls, str(tmp_path / "c.png"))
    ax = seen["ax"]
    labels = ax.get_legend_handles_labels()[1]
    assert labels == ["polygemm.gemm (auto)", "cupy.matmul (vendor)"] or set(labels) == {"polygemm.gemm (auto)", "cupy.matmul (vendor)"}
    assert ax.get_ylabel().startswith("TFLOP/s") and ax.get_ylim()[0] == 0


def test_call_result_new_makes_each_result_and_heads_its_own_table(monkeypatch):
    """``--result new`` times ``polygemm.gemm(a, b)`` beside the vendor's call that makes its result: ``a @ b`` on a
    host backend's NumPy arrays, ``cupy.matmul(a, b)`` on device arrays; a device backend's NumPy inputs (copied to
    the device and back into out=) are refused with the way out; its records get a table of their own, naming both calls."""
    (rec,) = bench.run_call_bench("cpu", "float64", [(2, 2, 2)], repeats=1, min_seconds=0.0, result="new")
    assert (rec.result, rec.vendor_call, rec.inputs) == ("new", "a @ b", "numpy") and rec.us_per_call > 0
    assert "`polygemm.gemm(a, b)` per call beside `a @ b`" in bench.call_markdown([rec])
    with pytest.raises(pg.UnsupportedProblemError, match="--result must be out or new"):
        bench.run_call_bench("cpu", "float32", [(8, 8, 8)], repeats=1, result="fresh")
    gpu = types.SimpleNamespace(**vars(_GPU), probe=lambda: types.SimpleNamespace(ok=True), synchronize=lambda: None)
    monkeypatch.setattr(bench_call.registry, "get_backend", lambda name: gpu)
    _fake_libs(monkeypatch, [])
    with pytest.raises(pg.UnsupportedProblemError, match="--result new.*--inputs numpy.*omit --result"):
        bench.run_call_bench("cuda", "float32", [(8, 8, 8)], repeats=1, inputs="numpy", result="new")
    base = dict(backend="cuda", mode="call", vendor_variant="cupy", inputs="device", requested="auto", tflops=300.0, vendor_tflops=310.0)
    md = bench.call_markdown([_record(**base, vendor_call="cupy.matmul(a, b, out=out)"),
                              _record(**base, vendor_call="cupy.matmul(a, b)", result="new", ratio=1.1)])
    assert "`polygemm.gemm(a, b, out=out)` per call beside `cupy.matmul(a, b, out=out)`" in md
    assert "`polygemm.gemm(a, b)` per call beside `cupy.matmul(a, b)`" in md and "**1.10×**" in md


def test_call_mode_variants_all_times_each_variant_through_the_call(tmp_path):
    """``--variants all`` in call mode (the default mode) times every non-vendor variant of the
    dtype through polygemm.gemm, as README's command does in kernel mode."""
    out = tmp_path / "all.json"
    assert main(["bench", "--device", "cpu", "--variants", "all", "--shapes", "16x16x16", "--repeats", "1", "--no-progress",
                 "--json", str(out)]) in (0, None)
    recs = bench.load_records(str(out))
    from polygemm import get_backend

    want = {v.name for v in get_backend("cpu").variants() if "float32" in v.dtypes and not v.vendor}
    assert {r.requested for r in recs} == want and all(r.mode == "call" for r in recs)


def test_array_lib_that_cannot_be_used_is_an_error_not_ignored(capsys):
    """--array-lib torch on the cpu backend is a usage error naming why, as --array-lib cupy without CuPy is, not a
    run timed on NumPy arrays all the same."""
    from polygemm.apps.cli import main

    assert main(["bench", "--device", "cpu", "--mode", "call", "--array-lib", "torch", "--shapes", "8x8x8",
                 "--repeats", "1", "--no-progress"]) == 2
    assert "--array-lib torch: backend 'cpu' takes host (NumPy) arrays" in capsys.readouterr().err


def test_matrix_takes_comma_separated_variants_as_bench_does(capsys):
    """matrix --variants blas,reference runs both, as bench --variants and POLYGEMM_TEST_VARIANTS take comma lists."""
    from polygemm.apps.cli import main

    assert main(["matrix", "--backends", "cpu", "--quick", "--dtypes", "float32", "--variants", "blas,reference",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "blas" in out and "reference" in out


@pytest.mark.parametrize("argv", [
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress", "--json", "-"],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--no-progress", "--markdown", "-"],
    ["matrix", "--backends", "cpu", "--quick", "--json", "-"],
])
def test_an_output_of_dash_is_a_usage_error_not_a_file_named_dash(tmp_path, monkeypatch, capsys, argv):
    # "--json -" (standard output to other tools) is refused: it would write a file named "-" in the current folder
    # while stdout holds only the human-readable lines (polygemm/apps/cli.py unwritable)
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    option = argv[argv.index("-") - 1]
    assert f"polygemm: error: {option} -: polygemm writes {option} to a file, not to standard output" in err
    assert not os.path.exists(tmp_path / "-")
    if argv[0] == "bench":  # a file named '-' when asked for so
        assert main([*argv[:-1], "./-"]) == 0 and (tmp_path / "-").exists()


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_bench_settle_must_be_finite(capsys, monkeypatch, value):
    """--settle inf would settle the first kernel for ever (nan: silently not at all)."""
    from polygemm.apps import bench
    from polygemm.apps.cli import main

    def ran(*args, **kwargs):
        raise AssertionError(f"timed with settle={kwargs.get('settle')}")

    monkeypatch.setattr(bench, "run_bench", ran)  # a regression fails here instead of settling for ever

    with pytest.raises(SystemExit) as exc:  # a usage error (exit 2)
        main(["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--settle", value])
    assert exc.value.code == 2 and "--settle: must be >= 0 seconds and finite" in capsys.readouterr().err


def test_bench_max_dim_that_leaves_no_shape_is_an_error(capsys):
    from polygemm.apps.cli import main

    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--max-dim", "4"]) == 2
    assert "--max-dim 4 leaves out every shape" in capsys.readouterr().err


def test_bench_functions_say_which_shape_did_not_fit():
    """Bench.run_call_bench and run_bench, called from a script, raise a MemoryError naming the product and the memory
    it needs, not NumPy's naming an array shape."""
    for fn, kw in ((bench.run_call_bench, {}), (bench.run_bench, {"variants": ["reference"]})):
        with pytest.raises(MemoryError, match=rf"^{TOO_LARGE}: operands and a result of that size need about [\d.]+ GiB"):
            fn("cpu", "float32", shapes=[tuple(int(x) for x in TOO_LARGE.split("x"))], repeats=1, **kw)


@pytest.mark.parametrize("extra, named", [
    (["--mode", "kernel", "--batch", "64"], "--batch 64: a call-mode option"),
    (["--mode", "kernel", "--inputs", "numpy"], "--inputs numpy: a call-mode option"),
    (["--mode", "kernel", "--result", "new"], "--result new: a call-mode option"),
    (["--mode", "kernel", "--array-lib", "torch"], "--array-lib torch: a call-mode option"),
    (["--mode", "kernel", "--batch", "2", "--inputs", "numpy"], "--batch 2, --inputs numpy: call-mode options"),
    (["--settle", "0.5"], "--settle 0.5: a kernel-mode option"),
    (["--mode", "call", "--settle", "1"], "--settle 1: a kernel-mode option"),
])
def test_bench_option_of_the_other_mode_is_refused_before_timing(capsys, monkeypatch, extra, named):
    # an option of the other mode is refused, not ignored: `--mode kernel --batch 64` would time single products
    # (records that read as a batch of 64), `--settle 1` in call mode would interleave as ever
    from polygemm.apps import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("timed with an option of the other mode"))
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed with an option of the other mode"))
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--no-progress", *extra])
    assert rc == 2 and out == "" and "Traceback" not in err, (rc, out, err)
    assert named in err and ("pass --mode call" in err or "pass --mode kernel" in err)


def test_bench_names_the_preset_a_typo_meant(capsys):
    from polygemm.apps.cli import main
    assert main(["bench", "--device", "cpu", "--shapes", "squar"]) == 2
    assert "got 'squar' (did you mean 'square'?); presets: square" in capsys.readouterr().err
    assert main(["bench", "--device", "cpu", "--shapes", "12x12"]) == 2
    assert "did you mean" not in capsys.readouterr().err  # no preset is near a malformed shape


def test_bench_device_from_the_environment_is_named_and_checked_before_the_run(capsys, monkeypatch):
    # POLYGEMM_DEVICE=bogus polygemm bench names the variable to a user who passed no --device, and an unavailable
    # --device is refused before the run's heading
    with monkeypatch.context() as env:
        env.setenv("POLYGEMM_DEVICE", "bogus")
        assert main(["bench", "--shapes", "8x8x8"]) == 2
        assert "$POLYGEMM_DEVICE='bogus'" in capsys.readouterr().err
    if {i.name: i for i in pg.backends()}["cuda"].available:
        return
    assert main(["bench", "--device", "cuda", "--shapes", "8x8x8"]) == 2
    captured = capsys.readouterr()
    assert "device 'cuda' is unavailable" in captured.err and "polygemm bench:" not in captured.out


def test_bench_output_is_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    # a failure while writing --json leaves the last run's file whole: the new one is written aside and moved over it
    out = tmp_path / "r.json"
    out.write_text('{"command": "the last run", "records": []}')
    monkeypatch.setattr(bench, "run_call_bench",
                        lambda *a, sink, **k: sink.append(bench.BenchRecord(**kernel_bench_record(mode="call"))))

    def broken(obj, fh, **kw):
        fh.write('{"command": "polygemm bench", "rec')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", broken)
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(out)]) == 1  # said in one line
    assert out.read_text() == '{"command": "the last run", "records": []}'
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind


def test_two_outputs_to_one_file_are_refused_before_timing(tmp_path, capsys, monkeypatch):
    # --json r.out --markdown r.out would time everything, write the JSON, then replace it with the markdown: refused
    # before timing
    monkeypatch.setattr(bench, "run_call_bench", lambda *a, **k: pytest.fail("timed before refusing the outputs"))
    out = tmp_path / "r.out"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(out), "--markdown", str(tmp_path / "." / "r.out")]) == 2
    assert "--json writes that file too" in capsys.readouterr().err and not out.exists()


def test_markdown_of_records_without_a_vendor_and_of_a_named_variant():
    # kernel mode without a vendor variant prints no "nan" cells, "(nan×)" or vendor row of "nan"; call mode heads a
    # named variant's column with its name, not "variant auto chose"
    nan = float("nan")
    text = bench.to_markdown([bench.BenchRecord(**kernel_bench_record(vendor_variant="", vendor_tflops=nan, ratio=nan))], "polygemm bench")
    assert "nan" not in text and "no vendor variant to compare" in text and "| blas | 100.0 |" in text
    call = bench.BenchRecord(**kernel_bench_record(mode="call", variant="numpy", requested="numpy", inputs="numpy", vendor_call="numpy.matmul"))
    text = bench.to_markdown([call], "polygemm bench")
    assert "variant that ran" in text and "auto chose" not in text
    auto = bench.BenchRecord(**kernel_bench_record(mode="call", requested="auto", inputs="numpy", vendor_call="numpy.matmul"))
    assert "variant auto chose" in bench.to_markdown([auto], "polygemm bench")


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_bench_checks_every_variant_name_before_timing(tmp_path, capsys, monkeypatch, mode):
    # every variant name is checked before the run's heading and any timing: in call mode --variants blas nosuch would
    # time every shape with blas (on a GPU, the whole run) before failing on the typo, with no --json
    def timed(*args, **kwargs):
        raise AssertionError("timed before the names were checked")

    monkeypatch.setattr(bench, "run_call_bench", timed)
    monkeypatch.setattr(bench, "run_bench", timed)
    out = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--mode", mode, "--shapes", "8x8x8", "--variants", "blas", "nosuch",
                 "--json", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "--variants: 'nosuch' is not a float32 variant of cpu" in captured.err
    assert "polygemm bench:" not in captured.out and not out.exists()


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_bench_settle_out_of_range_is_a_usage_error(capsys, monkeypatch, value):
    # a bad --settle is a usage error: exit 2 and argparse's form, as for any other option
    from polygemm.apps import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("timed with a bad --settle"))
    last = usage_error(capsys, ["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--settle", value])
    assert last == f"polygemm bench: error: argument --settle: must be >= 0 seconds and finite; got {value!r}"


@pytest.mark.parametrize("argv", [
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--variants", ","],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--mode", "kernel", "--variants", ""],
    ["matrix", "--backends", "cpu", "--quick", "--variants", ",", "--no-progress"],
])
def test_variants_that_name_nothing_are_a_usage_error(capsys, argv, tmp_path):
    # bench --variants , would time nothing (an empty --json) and matrix --variants , would run every variant: both
    # are usage errors
    js = tmp_path / "r.json"
    assert main(argv + (["--json", str(js)] if argv[0] == "bench" else [])) == 2
    captured = capsys.readouterr()
    assert "--variants" in captured.err and "names no variant" in captured.err
    assert not js.exists() and "cpu" not in captured.out


def test_markdown_of_no_records_says_so():
    md = bench.to_markdown([], "polygemm bench --device cpu")
    assert "`polygemm bench --device cpu`" in md and "(no records)" in md


def test_ladder_tables_step_rung_by_rung_at_the_largest_cubes():
    recs = [_record(backend="cuda", variant=v, m=s, n=s, k=s, tflops=t, vendor_tflops=500.0, ratio=t / 500.0,
                    vendor_variant="cublas")
            for v, s, t in (("sgemm_v1", 4096, 100.0), ("sgemm_v2", 4096, 250.0), ("sgemm_v2", 8192, 300.0),
                            ("lone_v1", 4096, 50.0))]
    md = bench.to_markdown(recs, "polygemm bench")
    assert "#### Ladder `sgemm`: step by step" in md
    assert "Ladder `lone`" not in md  # one rung is no ladder
    rows = {line.split("|")[1].strip(): line for line in md.split("#### Ladder `sgemm`")[1].splitlines() if line.startswith("| sgemm")}
    assert "– | – | –" in rows["sgemm_v1"]  # no 8192³ record of the first rung
    assert "2.50×" in rows["sgemm_v2"]  # 250 over the previous rung's 100 at 4096³
    assert "4096³" in md and "8192³" in md


def test_the_numpy_vendor_call_decides_nothing_per_call():
    """The timed NumPy call is numpy.matmul (or a @ b) itself: its path for the dtype is chosen at setup, no attribute
    of the arrays read per call (dtype.name alone costs about as much as a small product)."""
    class Watched(np.ndarray):
        @property
        def dtype(self):
            raise AssertionError("dtype read per call")

    lib, (vendor,) = bench.call_setup(pg.get_backend("cpu"), "float64")
    a, out = np.eye(2).view(Watched), np.empty((2, 2))
    vendor.matmul(a, a, out)
    assert np.array_equal(out, np.eye(2)) and np.array_equal(np.asarray(vendor.matmul_new(a, a)), np.eye(2))
    _, (half,) = bench.call_setup(pg.get_backend("cpu"), "float16")  # through float32, as polygemm computes it
    out16 = np.empty((2, 2), np.float16)
    half.matmul(np.eye(2, dtype=np.float16), np.eye(2, dtype=np.float16), out16)
    assert np.array_equal(out16, np.eye(2)) and half.matmul_new(np.eye(2, dtype=np.float16), np.eye(2, dtype=np.float16)).dtype == np.float16


def test_a_variant_named_twice_is_timed_once(tmp_path):
    out = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--variants", "blas", "blas,blas", "--repeats", "1",
                 "--json", str(out), "--no-progress"]) == 0
    assert [r["requested"] for r in json.loads(out.read_text())["records"]] == ["blas"]


def test_shapes_and_variants_given_twice_add_up(tmp_path, capsys):
    """--shapes a --shapes b times both, as --shapes a b does (not the last one alone); --variants the same."""
    path = tmp_path / "twice.json"
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--shapes", "16x16x16", "--variants", "blas",
                 "--variants", "reference", "--repeats", "1", "--no-progress", "--json", str(path)]) == 0
    records = json.loads(path.read_text())["records"]
    assert {(r["m"], r["requested"]) for r in records} == {(8, "blas"), (8, "reference"), (16, "blas"), (16, "reference")}


def test_array_lib_for_a_host_backend_is_refused_before_the_run_starts(capsys):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--array-lib", "cupy"])
    assert rc == 2 and out == "" and "--array-lib cupy" in err and "omit --array-lib" in err


def test_a_closed_stdout_keeps_the_records_timed_so_far(tmp_path, monkeypatch, capsys):
    """bench ... | head: the reader goes away mid-run; the command ends as a closed pipe ends it (141), and --json holds
    what was timed, marked interrupted, as after Ctrl-C."""
    def one_then_closed(*args, sink, **kw):
        sink.append(bench.BenchRecord(**kernel_bench_record(mode="call")))
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(bench, "run_call_bench", one_then_closed)
    path = tmp_path / "r.json"
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--json", str(path)])
    data = json.loads(path.read_text())
    assert rc == 141 and len(data["records"]) == 1 and data["interrupted"] is True


@pytest.mark.parametrize("mode", ["call", "kernel"])
def test_a_dtype_the_backend_does_not_compute_is_refused_before_the_first_line(musa, capsys, mode):
    from polygemm.apps.cli import main

    assert main(["bench", "--device", "musa", "--shapes", "64x64x64", "--mode", mode]) == 2
    captured = capsys.readouterr()
    assert "polygemm bench:" not in captured.out  # nothing timed, no header
    assert "--dtype float32: backend 'musa' does not compute it" in captured.err and "--dtype float16" in captured.err


def test_a_shape_written_with_commas_is_told_its_form(capsys):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--shapes", "128,64,32"])
    assert rc == 2 and out == "" and "'128,64,32': a shape is written 128x64x32" in err


def test_preset_names_are_taken_in_any_case():
    from polygemm.apps.bench_shapes import PRESETS, parse_shapes

    assert parse_shapes(["CPU"]) == parse_shapes(["cpu"]) == list(dict.fromkeys(PRESETS["cpu"]))


def test_bench_choice_options_are_taken_in_any_case_as_dtype_is():
    from polygemm.apps.cli import build_parser

    args = build_parser().parse_args(["bench", "--mode", "Kernel", "--inputs", "NUMPY", "--result", " New",
                                      "--array-lib", "Torch", "--dtype", "FP32"])
    assert (args.mode, args.inputs, args.result, args.array_lib, args.dtype) == ("kernel", "numpy", "new", "torch", "float32")


def test_bench_choice_option_out_of_its_choices_is_still_refused(capsys):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--mode", "Warp"])
    assert rc == 2 and "--mode" in err and "invalid choice" in err and "'call'" in err
