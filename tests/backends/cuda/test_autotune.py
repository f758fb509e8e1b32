"""auto and the tuning cache on the CPU: a measured winner runs before the cost model's estimate
and the plan says so; ``tune`` times the top candidates (a fake timer here); first-sight tuning
(POLYGEMM_AUTOTUNE=1) measures once per key, within its budget, on scratch buffers only."""

from __future__ import annotations

import contextlib
import threading
import time
import types

import numpy as np
import pytest

from polygemm.backends.cuda import autotune, tune_cache
from polygemm.backends.cuda.autotune import ScratchTimer, measure, tune_candidates
from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.cost import Candidate
from polygemm.backends.cuda.tune_cache import Measurement
from polygemm.errors import UnsupportedProblemError
from polygemm.problem import normalize

H = np.float16


def fake_rt(name: str = "NVIDIA H100 80GB HBM3", sms: int = 132):
    return types.SimpleNamespace(cc=(9, 0), name=name, arch="sm_90a", max_smem_per_block=232448, sms=sms)


@pytest.fixture
def be(tmp_path, monkeypatch):
    """A cuda backend planning for a stand-in H100, its tuning cache in a folder of the test's own."""
    monkeypatch.setattr(tune_cache, "tune_dir", lambda: tmp_path)
    monkeypatch.setattr(tune_cache, "shipped_dir", lambda: tmp_path / "shipped")  # no shipped measurement in the way
    monkeypatch.delenv("POLYGEMM_AUTOTUNE", raising=False)
    monkeypatch.delenv("POLYGEMM_TUNE_CACHE", raising=False)
    monkeypatch.setattr(autotune, "AUTOTUNE_BUDGET", [])
    tune_cache.forget_caches()
    b = CudaBackend()
    b._rt = fake_rt()
    yield b
    tune_cache.forget_caches()


def problem(m=512, n=256, k=1024):
    return normalize(np.zeros((m, k), H), np.zeros((k, n), H))


def by_name(times: dict[str, float], default: float = 9.0, pick: str = "the_estimates_pick"):
    """A fake timing: seconds a launch of each name (µs given), ``default`` for the others; auto's
    own choice (the estimate's) runs ``pick``."""
    def time_fn(name: str):
        if name == autotune.ESTIMATE:
            return pick, times.get(pick, default) * 1e-6
        return times.get(name, default) * 1e-6
    return time_fn


def test_auto_runs_the_variant_measured_fastest_and_explain_says_so(be):
    p = problem()
    estimated = be.plan(p)
    assert "estimated" in estimated.reason and "not measured on this GPU" in estimated.reason
    ranked = autotune.estimates(p, 90, 132)
    slow_pick = estimated.variant
    winner = ranked[1].label  # the runner-up, which the tuning times whatever its kind
    key, m = be.tune(p, time_fn=by_name({winner: 2.0, slow_pick: 5.0}, pick=slow_pick))
    assert m.winner == winner and m.estimate_pick == slow_pick and m.pick_us == pytest.approx(5.0) and m.gain == pytest.approx(2.5)
    plan = be.plan(p)
    assert plan.variant == winner
    assert "measured on this GPU" in plan.reason and m.date in plan.reason and "2.0 µs" in plan.reason
    assert slow_pick in plan.reason  # the estimate's pick, beside what it measured
    assert autotune.lookup(p, be._rt, 132) == m


def test_a_measured_winner_that_is_no_candidate_now_leaves_the_estimate_to_choose(be):
    p = problem()
    estimate = be.plan(p).variant
    key = autotune.tune_key(autotune.gpu_of(be._rt, 132), p)
    tune_cache.cache_for(key.gpu).put(key, Measurement("rung_removed_since", 1.0, {"rung_removed_since": 1.0}, estimate, 3.0,
                                                      "2026-01-01T00:00:00+00:00", "0"))
    plan = be.plan(p)
    assert plan.variant == estimate and "rung_removed_since" in plan.reason and "estimated" in plan.reason


def test_measurements_of_another_gpu_or_with_the_cache_off_are_not_read(be, monkeypatch):
    p = problem()
    estimate = be.plan(p).variant
    other = next(c.label for c in autotune.estimates(p, 90, 132)[1:] if c.label != estimate)
    be.tune(p, time_fn=by_name({other: 1.0}))
    assert be.plan(p).variant == other
    monkeypatch.setenv("POLYGEMM_TUNE_CACHE", "off")
    off = be.plan(p)
    assert off.variant == estimate and "POLYGEMM_TUNE_CACHE is off" in off.reason
    monkeypatch.delenv("POLYGEMM_TUNE_CACHE")
    be._rt = fake_rt("NVIDIA H200")
    assert be.plan(p).variant == estimate


def test_no_device_no_tuning_words():
    plan = CudaBackend().plan(problem())  # planning tests' backend: no runtime
    assert "measured" not in plan.reason and "not measured" not in plan.reason


def test_the_candidates_timed_are_the_top_estimates_that_run_and_the_best_splits():
    def cand(name, splits=0, padded=False):
        return Candidate(name, splits, 1.0, 1.0, padded=padded)

    ranked = [cand("a"), cand("b", 4), cand("a", padded=True), cand("x"), cand("c"), cand("d"), cand("e"), cand("f", 2),
              cand("g", 8), cand("h", 16), cand("i", 2), cand("j", 3)]
    names = tune_candidates(ranked)
    assert names[:3] == ["a", "b:split_k=4", "x"] and len(names) == len(set(names)) == 11
    tried = []

    def time_fn(name):
        tried.append(name)
        if name == "x":
            raise UnsupportedProblemError("cannot take these operands")
        return 1e-6

    m = measure(names, time_fn, top=4, splits=2)
    assert list(m.timings) == ["a", "b:split_k=4", "c", "d", "f:split_k=2", "g:split_k=8"]
    assert "x" in tried and "e" not in tried and "h:split_k=16" not in tried
    assert list(measure(names, time_fn, top=1, splits=0).timings) == ["a"]


def test_measure_keeps_the_fastest_skips_refusals_and_stops_at_the_budget():
    def time_fn(name):
        if name == "refused":
            raise UnsupportedProblemError("cannot take it")
        return {"pick": 4e-6, "fast": 1e-6, "nan": float("nan"), "late": 0.5e-6}[name]

    m = measure(["refused", "pick", "nan", "fast"], time_fn, {"pick": 3.5})
    assert (m.winner, m.us, m.estimate_pick, m.estimate_us) == ("fast", pytest.approx(1.0), "pick", 3.5)
    assert set(m.timings) == {"pick", "fast"} and m.gain == pytest.approx(4.0)
    ticks = iter([0.0, 5.0, 10.0])
    m = measure(["pick", "fast", "late"], time_fn, budget_s=1.0, clock=lambda: next(ticks))
    assert set(m.timings) == {"pick"}  # the first always runs; none starts past the budget
    assert measure(["refused"], time_fn) is None


def test_autotune_measures_a_new_product_once_however_many_threads_plan_it(be, monkeypatch):
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda rt: True)
    calls = []
    real = autotune.time_candidates

    def timed(self, p, rt, ranked, **kw):
        calls.append(p.m)
        time.sleep(0.05)
        winner = ranked[2].label
        return real(self, p, rt, ranked, time_fn=by_name({winner: 1.0}), budget_s=kw.get("budget_s", float("inf")))

    monkeypatch.setattr(autotune, "time_candidates", timed)
    p = problem()
    gate = threading.Barrier(8)
    plans = []

    def worker():
        gate.wait()
        plans.append(be.plan(p))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [512]
    assert len(plans) == 8 and len({pl.variant for pl in plans}) == 1
    assert all("measured on this GPU" in pl.reason for pl in plans)


def test_autotune_tunes_at_most_its_budget_of_shapes(be, monkeypatch):
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setenv("POLYGEMM_AUTOTUNE_SHAPES", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda rt: True)
    calls = []
    monkeypatch.setattr(autotune, "time_candidates",
                        lambda self, p, rt, ranked, **kw: calls.append(p.m) or measure([c.label for c in ranked[:2]], by_name({})))
    assert "measured on this GPU" in be.plan(problem(512)).reason
    assert "not measured on this GPU" in be.plan(problem(640)).reason
    assert calls == [512]


def test_autotune_failure_warns_and_the_estimate_chooses(be, monkeypatch):
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda rt: True)

    def broken(self, *a, **kw):
        raise MemoryError("out of device memory")

    monkeypatch.setattr(autotune, "time_candidates", broken)
    with pytest.warns(RuntimeWarning, match="POLYGEMM_AUTOTUNE: tuning 512x256x1024 float16 failed"):
        plan = be.plan(problem())
    assert "not measured on this GPU" in plan.reason


def test_autotune_waits_while_a_graph_is_captured(be, monkeypatch):
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda rt: False)
    monkeypatch.setattr(autotune, "time_candidates", lambda *a, **kw: pytest.fail("timed during a capture"))
    assert "not measured" in be.plan(problem()).reason


class _Dev:
    """A device operand at a fixed address (the CUDA array interface only; nothing is read)."""

    def __init__(self, shape, ptr, dtype=H):
        itemsize = np.dtype(dtype).itemsize
        self.__cuda_array_interface__ = {"shape": shape, "strides": (shape[1] * itemsize, itemsize), "typestr": np.dtype(dtype).str,
                                         "data": (ptr, False), "version": 3}
        self.span = (ptr, ptr + shape[0] * shape[1] * itemsize)


class _ScratchRt:
    """A stand-in runtime that hands out scratch at addresses of its own and logs every write."""

    def __init__(self):
        self.base = fake_rt()
        self.next = 0x7000_0000
        self.writes: list[tuple[int, int]] = []
        self.freed: list[int] = []
        rt = self

        class Buf:
            def __init__(self, n):
                self.ptr, rt.next = rt.next, rt.next + ((n + 4095) // 4096) * 4096

            def __int__(self):
                return self.ptr

            def free(self):
                rt.freed.append(self.ptr)

        class Event:
            def record(self):
                pass

            def synchronize(self):
                pass

            def time_till(self, other):
                return 0.004  # ms

        self.Buf = Buf
        self.drv = types.SimpleNamespace(memcpy_htod=lambda dst, src: self.writes.append((dst, src.nbytes)),
                                         memcpy_dtod=lambda dst, src, n: self.writes.append((dst, n)), Event=Event)
        self.ctx = types.SimpleNamespace(synchronize=lambda: None)

    def __getattr__(self, name):
        return getattr(self.base, name)

    def allocate(self, n):
        return self.Buf(n)

    @contextlib.contextmanager
    def active(self):
        yield


def test_autotune_times_on_scratch_buffers_never_the_callers_out_or_c(be, monkeypatch):
    """With POLYGEMM_AUTOTUNE=1 the plan of a call with device operands times its candidates on
    buffers of its own: every write and every launch lands there, none on a, b, c or out."""
    rt = _ScratchRt()
    be._rt = rt
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda r: True)
    launches = []

    class Launcher:
        def __init__(self, launch, a, b, c, alpha, beta, variant):
            self.args = (a, b, c, alpha, beta)

        def __call__(self):
            launches.append(self.args)

    monkeypatch.setattr(autotune, "KernelLauncher", Launcher)
    a, b = _Dev((512, 1000), 0x1000_0000), _Dev((1000, 264), 0x2000_0000)
    c, out = _Dev((512, 264), 0x3000_0000), _Dev((512, 264), 0x4000_0008)
    plan = be.plan(normalize(a, b, c, beta=1.0, out=out))
    assert "measured on this GPU" in plan.reason
    theirs = [x.span for x in (a, b, c, out)]
    assert launches and rt.writes
    for dst, n in rt.writes:
        assert dst >= 0x7000_0000 and not any(lo < dst + n and dst < hi for lo, hi in theirs)
    for pa, pb, pc, alpha, beta in launches:
        assert min(pa, pb, pc) >= 0x7000_0000 and (alpha, beta) == (1.0, 0.0)
        assert pc % 256 == 8  # the scratch result sits where out does within 256 bytes: the same alignment class
    assert len(rt.freed) == 3  # a, b and the result's scratch, freed after timing


def test_the_scratch_problem_keeps_the_callers_geometry(be):
    rt = _ScratchRt()
    a, b = _Dev((512, 1000), 0x1000_0000), _Dev((1000, 264), 0x2000_0000)
    p = normalize(a, b)
    with ScratchTimer(be, rt, p) as timer:
        q = timer.problem
        assert (q.a.ld, q.b.ld, q.a.layout, q.b.layout) == (1000, 264, "row", "row")
        assert q.residency == "cuda" and q.c is None and q.beta == 0.0
        gpu = autotune.gpu_of(fake_rt(), 132)
        assert autotune.tune_key(gpu, q) == autotune.tune_key(gpu, p)
    with pytest.raises(UnsupportedProblemError, match="does not run this problem itself"):
        with ScratchTimer(be, rt, normalize(np.zeros((64, 64), H).T, np.zeros((64, 64), H))) as timer:
            timer("hgemm_v2_wgmma_tma_64x32_col")  # its B tile read K-major only: the rung hands A to another rung


def test_the_event_timer_is_the_backends():
    rt = _ScratchRt()
    assert autotune.event_timer(rt)(lambda: None) == pytest.approx(4e-6)


def test_the_estimates_own_choice_is_timed_first_under_its_label():
    seen = []

    def time_fn(name):
        seen.append(name)
        if name == autotune.ESTIMATE:
            return "rung on aligned copies", 3e-6
        return {"a": 4e-6, "b": 2e-6, "c:split_k=2": 5e-6}[name]

    m = measure([autotune.ESTIMATE, "a", "b", "c:split_k=2"], time_fn, {"rung on aligned copies": 2.5}, top=2, splits=1)
    assert seen == ["auto", "a", "b", "c:split_k=2"]  # the estimate's own run counts for neither quota
    assert m.estimate_pick == "rung on aligned copies" and m.estimate_us == 2.5 and m.pick_us == pytest.approx(3.0)
    assert m.winner == "b" and m.gain == pytest.approx(1.5)
    m = measure([autotune.ESTIMATE, "a"], time_fn)
    assert m.winner == "rung on aligned copies" and m.gain == pytest.approx(1.0)


def test_a_winner_on_aligned_copies_runs_on_aligned_copies(be):
    p = problem(512, 1500, 2816)  # 3000-byte rows of B: TMA reads them from aligned copies
    rung = next(c.label for c in autotune.estimates(p, 90, 132) if c.variant.startswith("hgemm_v2_wgmma_tma") and not c.splits)
    padded = rung + " on aligned copies"
    key = autotune.tune_key(autotune.gpu_of(be._rt, 132), p)
    tune_cache.cache_for(key.gpu).put(key, Measurement(padded, 1.0, {padded: 1.0}, padded, 1.0, "2026-01-01T00:00:00+00:00", "0"))
    plan = be.plan(p)
    assert plan.variant == rung and "aligned copy" in plan.padding
    assert "measured on this GPU" in plan.reason and "picked it too" in plan.reason


def test_scratch_timing_of_the_estimate_reuses_its_time_for_the_same_name(be, monkeypatch):
    rt = _ScratchRt()
    launches = []

    class Launcher:
        def __init__(self, launch, a, b, c, alpha, beta, variant):
            self.variant = variant

        def __call__(self):
            launches.append(self.variant)

    monkeypatch.setattr(autotune, "KernelLauncher", Launcher)
    p = normalize(_Dev((512, 1024), 0x1000_0000), _Dev((1024, 256), 0x2000_0000))
    with ScratchTimer(be, rt, p) as timer:
        label, t = timer(autotune.ESTIMATE)
        assert label == be.plan(p).variant.split(" ")[0] and t > 0
        count = len(launches)
        assert timer(label) == (label, t) and len(launches) == count  # not timed twice


@pytest.mark.parametrize("rc, status, safe", [(0, 0, True), (0, 1, False), (904, 0, False)],
                         ids=["idle", "capturing", "driver-refuses"])
def test_timing_waits_for_a_captured_legacy_stream(rc, status, safe):
    entered = []

    class Ffi:
        def new(self, what):
            return [0]

    def capturing(stream, out):
        assert entered == ["in"]  # asked with the device's context current
        out[0] = status
        return rc

    cu = types.SimpleNamespace(ffi=Ffi(), lib=types.SimpleNamespace(cuStreamIsCapturing=capturing), stream=lambda h: h)
    rt = types.SimpleNamespace(cu=cu, enter=lambda: entered.append("in") or True, leave=lambda: entered.append("out"))
    assert autotune.safe_to_time(rt) is safe and entered == ["in", "out"]
    assert autotune.safe_to_time(fake_rt()) is False  # no driver: nothing timed


def test_scratch_for_a_batch_holds_every_matrix(be):
    rt = _ScratchRt()
    sizes = []
    real = rt.allocate
    rt.allocate = lambda n: sizes.append(n) or real(n)
    p = normalize(np.zeros((4, 64, 32), np.float32), np.zeros((4, 32, 16), np.float32))
    with ScratchTimer(be, rt, p) as timer:
        q = timer.problem
        assert (q.count, q.a.batch_stride, q.b.batch_stride) == (4, 64 * 32, 32 * 16)
    assert sizes == [4 * 64 * 32 * 4 + 256, 4 * 32 * 16 * 4 + 256, 4 * 64 * 16 * 4 + 256]


def test_a_bfloat16_product_takes_the_float16_measurement_of_its_operands_where_it_has_none(be):
    import ml_dtypes

    p = problem()
    ranked = autotune.estimates(p, 90, 132)
    winner = ranked[1].label  # the runner-up, which the tuning times whatever its kind
    be.tune(p, time_fn=by_name({winner: 2.0}))
    bf = np.dtype(ml_dtypes.bfloat16)
    plan = be.plan(normalize(np.zeros((512, 1024), bf), np.zeros((1024, 256), bf)))
    assert plan.variant == winner and "of the float16 product" in plan.reason
    wide = be.plan(normalize(np.zeros((512, 1024), bf), np.zeros((1024, 256), bf), out_dtype=np.float32))
    assert "not measured on this GPU" in wide.reason  # a float32 result: another product's measurement


def test_autotune_measures_this_gpu_rather_than_keep_a_shipped_or_borrowed_measurement(be, monkeypatch, tmp_path):
    import json

    import ml_dtypes

    p = problem()
    ranked = autotune.estimates(p, 90, 132)
    shipped_winner, own_winner = ranked[1].label, ranked[2].label
    key = autotune.tune_key(autotune.gpu_of(be._rt, 132), p)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    entry = Measurement(shipped_winner, 1.0, {shipped_winner: 1.0}, "", 0.0, "2026-01-01T00:00:00+00:00", "0")
    (shipped / f"{key.gpu.slug}.json").write_text(json.dumps(
        {"format": tune_cache.FORMAT, "gpu": key.gpu.record(), "entries": {key.text(): entry.record()}}))
    tune_cache.forget_caches()
    assert be.plan(p).variant == shipped_winner and "this GPU model" in be.plan(p).reason  # without autotune: shipped
    monkeypatch.setenv("POLYGEMM_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "safe_to_time", lambda rt: True)
    calls = []
    monkeypatch.setattr(autotune, "time_candidates",
                        lambda self, p, rt, ranked, **kw: calls.append(p.dtype.name) or measure([own_winner], by_name({own_winner: 0.5})))
    own = be.plan(p)
    assert own.variant == own_winner and "measured on this GPU:" in own.reason and calls == ["float16"]
    bf = np.dtype(ml_dtypes.bfloat16)
    bf_plan = be.plan(normalize(np.zeros((512, 1024), bf), np.zeros((1024, 256), bf)))  # float16's is borrowed, then measured
    assert calls == ["float16", "bfloat16"] and "of the float16 product" not in bf_plan.reason


@pytest.mark.parametrize("value", ["inf", "1e400", "-inf", "nan"])
def test_an_endless_autotune_budget_warns_and_keeps_the_default(monkeypatch, value):
    from polygemm.backends.cuda.autotune import AutotuneBudget

    monkeypatch.setenv("POLYGEMM_AUTOTUNE_SHAPES", value)
    monkeypatch.setenv("POLYGEMM_AUTOTUNE_SECONDS", value)
    with pytest.warns(RuntimeWarning, match=r"is not a finite number >= 0"):
        budget = AutotuneBudget()
    assert budget.shapes == 64 and budget.seconds == 2.0
