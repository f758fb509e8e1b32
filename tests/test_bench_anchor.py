"""``polygemm bench``'s vendor anchor and the spread of its ratios, on the CPU with fakes: torch
and cupy stand-ins for the vendor libraries, a fake clock for the wall clock."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from polygemm.apps import bench, bench_call
from polygemm.apps.bench_timing import CallTimed
from polygemm.apps.cli import main
from polygemm.errors import UnsupportedProblemError


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
    monkeypatch.setattr(bench_call, "call_setup", lambda be, dtype, prefer="auto": (numpy_lib, fakes))
    monkeypatch.setattr(bench_call, "CallTimed", Timed)


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



def test_plot_draws_each_vendor_library_timed_beside_the_call(monkeypatch, tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from polygemm.apps import plot

    seen = {}
    real_savefig = matplotlib.figure.Figure.savefig

    def keep(fig, *a, **k):
        seen["ax"] = fig.axes[0]
        return real_savefig(fig, *a, **k)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda *a: None)
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
