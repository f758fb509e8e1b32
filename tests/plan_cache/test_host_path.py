"""The cached call's host path: operand keys and streams, the lock, the launcher's fast path (on the CPU)."""

from __future__ import annotations

import dataclasses
import random
import struct
import sys
import threading
import types

import numpy as np
import pytest

import polygemm as pg
from polygemm import api
from polygemm.core.normalize import normalize

from tests.helpers import fake_torch
from tests.plan_cache.launch_fakes import FakeRuntime as _FakeRuntime, fake_driver as _fake_driver, fake_maps, launches as _launches  # noqa: F401


def _fake_cupy(monkeypatch, stream_ptr=0x5000):
    fake = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, ptr, shape, strides, dtype="float16", device=0):
            self.data = types.SimpleNamespace(ptr=ptr, device_id=device)
            self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
            self.size = int(np.prod(shape))
            self.device = types.SimpleNamespace(id=device)  # what a cupy_view may read

    fake.ndarray = ndarray
    current = {"ptr": stream_ptr}
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=current["ptr"]))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return ndarray


def _key_per_operand(a, b, c, out, alpha=1.0, beta=0.0, device="cuda", variant="auto"):
    """_key with the batched CuPy/torch views switched off by the caller: each operand viewed on its own."""
    return api.plan_cache._key(a, b, c, out, alpha, beta, device, variant)


def _views_off(monkeypatch):
    monkeypatch.setattr(api.plan_cache, "cupy_views", lambda *ops: None)
    monkeypatch.setattr(api.plan_cache, "torch_views", lambda *ops: None)


def _keys_both_ways(monkeypatch, calls):
    got = [api.plan_cache._key(*ops, 1.0, 0.0, "cuda", "auto") for ops in calls]
    with monkeypatch.context() as m:
        _views_off(m)
        want = [_key_per_operand(*ops) for ops in calls]
    return got, want


class _CountingLock:
    def __init__(self):
        self.inner, self.entered = threading.Lock(), 0

    def __enter__(self):
        self.inner.acquire()
        self.entered += 1

    def __exit__(self, *exc):
        self.inner.release()


def _plain_device_overlap_free(entry, a, b, c, out, views):
    """_overlap_free's device branch as plain interval checks: the answer the fast path must give."""
    if out is None:
        return True
    spans, lows = entry.spans, entry.lows
    o_ptr = views[3][1]
    o_lo, o_hi = o_ptr + lows[3], o_ptr + spans[3]
    for i, x in enumerate((a, b, c)):
        if x is None or (i == 2 and views[2][1] == o_ptr) or not spans[i] or not spans[3]:
            continue
        if views[i][1] + lows[i] < o_hi and o_lo < views[i][1] + spans[i]:
            return False
    return True


class _FakeCudaArray:
    def __init__(self, ptr, shape, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (ptr, False), "strides": strides, "version": 3}



def test_cupy_calls_are_keyed_and_streamed_as_each_operands_view_gave(monkeypatch):
    """Every mix the one-read path takes (c and out absent, in place, on another GPU, empty
    arrays, misaligned pointers) gives the key, pointers and streams the per-operand views gave."""
    nd = _fake_cupy(monkeypatch)
    a = nd(0x7F0000000000, (8, 4), (8, 2))
    b = nd(0x7F0000001000, (4, 6), (12, 2))
    c = nd(0x7F0000002000, (8, 6), (12, 2))
    other = nd(0x7F0000003008, (8, 6), (12, 2), device=1)  # another GPU, 8-byte class
    empty_a, empty_b = nd(0x7F0000004000, (0, 4), (8, 2)), nd(0x7F0000005000, (4, 0), (0, 2))
    host = np.ones((8, 6), np.float16)
    calls = [(a, b, None, None), (a, b, c, None), (a, b, None, c), (a, b, c, c), (a, b, c, other), (a, b, other, other),
             (empty_a, b, None, None), (a, empty_b, None, None), (a, b, c, host), (a, b, host, None)]
    got, want = _keys_both_ways(monkeypatch, calls)
    assert got == want
    assert got[0][1][0][2] == 0x5000 and got[6][1][0][1] == 0  # the current stream; no pointer for an empty array


def test_torch_calls_are_keyed_and_streamed_as_each_operands_view_gave(monkeypatch):
    T = fake_torch(monkeypatch)
    a, b = T(0x1000, (8, 4), (4, 1), index=1), T(0x2008, (4, 6), (6, 1), index=1)
    c = T(0x3000, (8, 6), (6, 1), index=1)
    calls = [(a, b, None, None), (a, b, c, c), (a, b, None, c),
             (a, b, T(0x4000, (8, 6), (6, 1), index=0), None),  # c on another GPU
             (a, T(0x2000, (4, 6), (6, 1), index=1, grad=True), None, None),  # requires grad
             (T(0x1000, (8, 4), (4, 1), device="cpu"), T(0x2000, (4, 6), (6, 1), device="cpu"), None, None)]
    got, want = _keys_both_ways(monkeypatch, calls)
    assert got == want
    assert got[0][1][0][2] == 0x9001 and got[4][0] is None and got[5][0] is None  # (a key of None: not keyed)


def test_torch_tensors_on_another_device_type_are_not_keyed_as_cuda(monkeypatch):
    """get_device() is a tensor's index on any device (mps:0, xpu:0 and a privateuse1 device
    give 0, as cuda:0 does): torch_views keyed such tensors as CUDA ones, so a call on xpu:0
    tensors hit the plan of an earlier cuda:0 call of the same description and launched a CUDA
    kernel on their pointers. They are left to the per-operand views, which key them not at
    all (the full normalization refuses them every time), as before."""
    from polygemm.interop import torch_views

    T = fake_torch(monkeypatch)
    ca, cb = T(0x1000, (8, 4), (4, 1)), T(0x2000, (4, 6), (6, 1))
    xa, xb = T(0x1000, (8, 4), (4, 1), device="xpu"), T(0x2000, (4, 6), (6, 1), device="xpu")
    assert torch_views(ca, cb, None, None) is not None
    assert torch_views(xa, xb, None, None) is None
    assert torch_views(ca, xb, None, None) is None and torch_views(ca, cb, None, xa) is None
    got, want = _keys_both_ways(monkeypatch, [(xa, xb, None, None), (ca, xb, None, None), (ca, cb, T(0x3000, (8, 6), (6, 1), device="mps"), None)])
    assert got == want and [key for key, _ in got] == [None, None, None]


def test_a_free_threaded_build_looks_plans_up_under_the_lock(monkeypatch):
    """Without the GIL OrderedDict's move_to_end is not atomic beside another thread's clear or popitem (CPython 3.13t
    crashes so, gh-125996) and the counters' += lose counts: there the lookup takes the lock; with the GIL it is
    lock-free."""
    cache = api.plan_cache.PlanCache(4)
    lock = cache._lock = _CountingLock()  # type: ignore[assignment]
    cache.put(("k",), "entry")  # type: ignore[arg-type]
    entered = lock.entered
    # the lookup is chosen once, when the class is made: lock-free with the GIL, locked without it
    assert api.plan_cache.PlanCache.get is (api.plan_cache.PlanCache._get_locked if api.plan_cache._FREE_THREADED else api.plan_cache.PlanCache._get)
    monkeypatch.setattr(api.plan_cache.PlanCache, "get", api.plan_cache.PlanCache._get)  # the GIL's lookup
    assert cache.get(("k",)) == "entry" and cache.get(("x",)) is None and lock.entered == entered
    monkeypatch.setattr(api.plan_cache.PlanCache, "get", api.plan_cache.PlanCache._get_locked)  # a free-threaded build's
    assert cache.get(("k",)) == "entry" and cache.get(("x",)) is None and lock.entered == entered + 2
    assert cache.info() == {"hits": 2, "misses": 2, "size": 1, "maxsize": 4}


@pytest.mark.parametrize("free_threaded", [False, True])
def test_lookups_beside_puts_evictions_and_clears_never_fail_or_lose_counts(monkeypatch, free_threaded):
    monkeypatch.setattr(api.plan_cache.PlanCache, "get", api.plan_cache.PlanCache._get_locked if free_threaded else api.plan_cache.PlanCache._get)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    cache = api.plan_cache.PlanCache(3)
    keys = [(i,) for i in range(6)]
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader():
        try:
            for n in range(20000):
                entry = cache.get(keys[n % 6])
                assert entry is None or entry == keys[n % 6]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def writer():
        n = 0
        while not stop.is_set():
            cache.put(keys[n % 6], keys[n % 6])  # type: ignore[arg-type]  # evicts: maxsize 3
            if n % 50 == 0:
                with cache._lock:  # clear() without resetting the counters read below
                    cache._data.clear()
            n += 1

    try:
        readers = [threading.Thread(target=reader) for _ in range(4)]
        w = threading.Thread(target=writer)
        w.start()
        for t in readers:
            t.start()
        for t in readers:
            t.join()
        stop.set()
        w.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert cache.hits + cache.misses == 4 * 20000


def test_overlap_free_agrees_with_the_plain_interval_check_for_device_operands():
    rnd = random.Random(7)
    for _ in range(20000):
        has_c, has_out = rnd.random() < 0.6, rnd.random() < 0.8
        spans = tuple(rnd.choice([0, 16, 64, 256]) if present else 0 for present in (True, True, has_c, has_out))
        lows = tuple(-rnd.choice([0, 0, 16, 48]) if s else 0 for s in spans)  # negative strides reach below the pointer
        ptrs = [rnd.randrange(0, 1024, 16) for _ in range(4)]
        if has_c and has_out and rnd.random() < 0.3:
            ptrs[2] = ptrs[3]  # in place
        objs = [object(), object(), object() if has_c else None, object() if has_out else None]
        views = tuple(((), p if o is not None else 0, None) for p, o in zip(ptrs, objs))
        entry = types.SimpleNamespace(spans=spans, lows=lows, host=False)
        assert api.plan_cache._overlap_free(entry, *objs, views) == _plain_device_overlap_free(entry, *objs, views), (spans, lows, ptrs, objs)


def test_a_device_operand_no_kernel_addresses_is_planned_and_reported_once():
    """gemm's first _bind raises NotWhole; _bind_whole goes on from there: the operands are normalized once (one
    plan-cache miss for one call), and no second NotWhole is raised while the first is handled (a traceback showing
    the same error twice, 'During handling of the above exception, another exception occurred')."""
    a = _FakeCudaArray(0x10000, (16, 64), strides=(512, 8))  # neither row- nor column-major
    b = _FakeCudaArray(0x20000, (64, 32))
    pg.clear_plan_cache()
    with pytest.raises(pg.ArgumentError, match="neither row- nor column-major") as info:
        pg.gemm(a, b, device="cuda")
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert pg.plan_cache_info()["misses"] == 1


def test_the_retry_binds_the_operands_made_whole_once_each(monkeypatch):
    """A NotWhole given to _bind_whole is handled as if its own _bind had raised it: the named
    operand is made whole and bound, nothing else bound again."""
    from polygemm.problem import NotWhole

    bound: list[tuple] = []
    whole = object()

    def fake_bind(a, b, c, *rest):
        bound.append((a, b, c))
        if a is not whole:
            raise NotWhole("a is not whole", "a")
        return "entry", "call", False, ""

    monkeypatch.setattr(api.plan_cache, "bind", fake_bind)
    monkeypatch.setattr(api.plan_cache, "made_whole", lambda given, shape: whole)
    given = object()
    with pytest.raises(NotWhole) as info:
        fake_bind(given, 1, None)
    assert api.plan_cache.bind_whole(given, 1, None, 1.0, 0.0, None, "auto", None, None, info.value) == ("entry", "call", False, "", ["a"])
    assert bound == [(given, 1, None), (whole, 1, None)]


def test_prepare_fast_path_packs_what_the_full_path_packs(fake_maps):
    """A built plain launch (one kernel launch on the caller's pointers) packs the same bytes
    as the full prepare, swap, batch, tensor maps and all, for every call's pointers."""
    from polygemm.backends.cuda.launch import PreparedLaunch

    plain, _ = _launches()
    calls = [(0x100000, 0x200000, 0x300000, 1.0, 0.0), (0x110000, 0x210000, 0x310000, 0.5, 2.0), (0x120000, 0x220000, 0x300000, 1.0, 0.0)]
    for what, (spec, lp) in plain.items():
        rt = _FakeRuntime()
        pl = PreparedLaunch(rt, spec, lp)  # type: ignore[arg-type]
        first = pl.prepare(*calls[0])
        assert type(first) is bytes and pl._plain, what
        for call in calls:
            fast = pl.prepare(*call)
            pl._plain = False
            full = pl.prepare(*call)
            pl._plain = True
            assert fast == full, (what, call)
            if lp.swap:  # B's pointer where the kernel reads A's
                assert struct.pack("<Q", call[1]) in fast[:32], what
        assert rt.built == 1, what


def test_prepare_fast_path_is_never_taken_by_launches_that_need_more_than_parameters(fake_maps):
    """Split-K and stream-K (a workspace per call), packing into scratch, and cuBLAS (no
    kernel of polygemm's) keep the full prepare on every call."""
    from polygemm.backends.cuda.launch import PreparedLaunch, SplitLaunch

    _, other = _launches()
    for what, (spec, lp) in other.items():
        pl = PreparedLaunch(_FakeRuntime(), spec, lp)  # type: ignore[arg-type]
        for _ in range(2):
            got = pl.prepare(0x100000, 0x200000, 0x300000, 1.0, 0.0)
            assert not pl._plain, what
            if what in ("packed", "cuBLAS"):
                assert type(got) is tuple, what
            else:
                assert type(got) is SplitLaunch, what
                pl.discard(got)
        assert (pl._kernel is None) == (what == "cuBLAS"), what


def test_launcher_writes_each_threads_slot_and_checks_the_capacity():
    from polygemm.backends.cuda import driver as drv_mod
    from polygemm.errors import DeviceError

    drv, launched, rc = _fake_driver()
    k = drv_mod.Kernel(drv, "entry", None, drv.ffi.NULL, [(0, 8)])
    go = k.launcher((4, 2), (128,), 1024)
    go(b"\x01" * 24, 7)
    go(b"\x02" * 8, 0)  # shorter: only its own bytes, the slot reused
    assert [(buf, stream, geo) for _, buf, stream, geo, _, _ in launched] == [
        (b"\x01" * 24, 7, (4, 2, 1, 128, 1, 1, 1024)), (b"\x02" * 8, 0, (4, 2, 1, 128, 1, 1, 1024))]
    assert launched[0][4] == launched[1][4] == int(drv.ffi.cast("uintptr_t", drv.launch_slot().params))
    with pytest.raises(DeviceError, match="exceed"):
        go(b"\x00" * (drv_mod._PARAM_CAPACITY + 1), 0)
    go(b"\x03" * drv_mod._PARAM_CAPACITY, 0)  # the capacity itself fits
    assert launched[-1][1] == b"\x03" * drv_mod._PARAM_CAPACITY
    rc["next"] = 700
    with pytest.raises(DeviceError, match="failed: CUresult 700"):
        go(b"\x04" * 8, 0)
    rc["next"] = 0

    # another thread: its own slot (created on its first launch), its own bytes
    results: list = []

    def other():
        try:
            go(b"\x05" * 16, 3)
            results.append(launched[-1])
        except BaseException as exc:  # noqa: BLE001
            results.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    (ident, buf, stream, _, params, _), = results
    assert ident != threading.get_ident() and buf == b"\x05" * 16 and stream == 3
    assert params != launched[0][4]  # not this thread's slot
    go(b"\x06" * 8, 0)
    assert launched[-1][1] == b"\x06" * 8 and launched[-1][4] == launched[0][4]
    assert not any(coop for *_, coop in launched)
    errors: list = []

    def first_too_big():  # a thread's first launch (no slot yet) checks the capacity too
        try:
            go(b"\x00" * (drv_mod._PARAM_CAPACITY + 1), 0)
        except DeviceError as exc:
            errors.append(exc)

    t = threading.Thread(target=first_too_big)
    t.start()
    t.join()
    assert len(errors) == 1 and "exceed" in str(errors[0])


def test_launcher_configs_name_each_stream_and_a_cooperative_launch_says_so():
    """The launcher keeps one launch config per stream (read-only once made, so threads share
    it): each launch goes with its own stream's config, also after more streams than it keeps
    configs for, and a cooperative launcher's configs carry the cooperative attribute."""
    from polygemm.backends.cuda import driver as drv_mod

    drv, launched, _ = _fake_driver()
    k = drv_mod.Kernel(drv, "entry", None, drv.ffi.NULL, [(0, 8)])
    go = k.launcher((132,), (384,), 4096, cooperative=True)
    for stream in [0, 5, 0, 9, 5] + list(range(100, 100 + 2 * drv_mod._CONFIGS_KEPT)) + [5]:
        go(b"\x07" * 8, stream)
        assert launched[-1][2] == stream and launched[-1][5] and launched[-1][3] == (132, 1, 1, 384, 1, 1, 4096)
    assert go.cooperative


def test_what_the_retry_raises_is_not_chained_to_the_first_notwhole(monkeypatch):
    """a made whole, then b refused (not CuPy's nor torch's): the error is b's alone, not 'during handling of' a's
    NotWhole (gemm does not raise it inside the handler around the retry)."""
    from polygemm.problem import NotWhole

    given, whole = object(), object()

    def fake_bind(a, b, c, *rest):
        raise NotWhole("a is not whole", "a") if a is given else NotWhole("b is not whole", "b")

    monkeypatch.setattr(api.plan_cache, "bind", fake_bind)
    monkeypatch.setattr(api.plan_cache, "made_whole", lambda x, shape: whole if x is given else None)
    with pytest.raises(NotWhole, match="^b is not whole") as info:
        pg.gemm(given, object())
    assert info.value.__context__ is None


class _CountedCudaArray:
    """A device array whose __cuda_array_interface__ counts its reads."""

    def __init__(self, ptr, shape, strides=None):
        self.reads = 0
        self._iface = {"shape": shape, "typestr": "<f4", "data": (ptr, False), "strides": strides, "version": 3}

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        return dict(self._iface)


def test_a_call_planned_now_reads_each_device_operands_interface_once():
    """The cache key reads each operand's interface; normalization takes those reads, not new ones."""
    a, b = _CountedCudaArray(0x10000, (16, 64)), _CountedCudaArray(0x20000, (64, 32), strides=(4, 256))
    c, out = _CountedCudaArray(0x30000, (16, 32)), _CountedCudaArray(0x40000, (16, 32))
    pg.clear_plan_cache()
    key, views = api.plan_cache._key(a, b, c, out, 1.0, 1.0, "cuda", "auto")
    assert key is not None and [x.reads for x in (a, b, c, out)] == [1, 1, 1, 1]
    problem = normalize(a, b, c, beta=1.0, out=out, views=views)
    assert [x.reads for x in (a, b, c, out)] == [1, 1, 1, 1]
    assert problem.b.layout == "col" and problem.out.ptr == 0x40000
    with pytest.raises(pg.PolygemmError):  # no GPU here: refused once the operands are read, each once
        pg.gemm(a, b, c, out=out, device="cuda")
    assert [x.reads for x in (a, b, c, out)] == [2, 2, 2, 2]


@pytest.mark.parametrize("make", [
    lambda T: (_FakeCudaArray(0x10000, (16, 64)), _FakeCudaArray(0x20000, (64, 32), strides=(4, 256)), None),
    lambda T: (_FakeCudaArray(0x10000, (3, 16, 64), strides=(-4096, 256, 4)), _FakeCudaArray(0x20000, (64, 32)),
               _FakeCudaArray(0x40000, (3, 16, 32))),
    lambda T: (T(0x1000, (8, 4), (4, 1)), T(0x2000, (4, 6), (6, 1)), T(0x3000, (8, 6), (6, 1))),  # (the stand-in
    # tensors name no strides in their array interface: contiguous ones only)
    lambda T: (T(0x1000, (2, 8, 4), (32, 4, 1)), T(0x2000, (4, 6), (6, 1)), None),
])
def test_normalizing_from_the_keys_views_describes_what_reading_the_operands_does(monkeypatch, make):
    a, b, out = make(fake_torch(monkeypatch))
    key, views = api.plan_cache._key(a, b, None, out, 1.0, 0.0, "cuda", "auto")
    assert key is not None
    read = normalize(a, b, out=out)
    taken = normalize(a, b, out=out, views=views)
    for mine, theirs in zip(taken.operands(), read.operands()):
        assert dataclasses.replace(mine, interface=None) == dataclasses.replace(theirs, interface=None)
        assert mine.interface.get("stream") == theirs.interface.get("stream") or theirs.interface.get("stream") is None
    assert (taken.m, taken.n, taken.k, taken.batch, taken.residency) == (read.m, read.n, read.k, read.batch, read.residency)


def test_a_cached_numpy_call_the_backend_computes_directly_binds_no_call(monkeypatch):
    """A host plan of alpha 1 and beta 0 that the backend computes from a, b and out alone (cpu's numpy.matmul) is
    run on its cached calls by the function decided with the plan; the others go through execute."""
    cpu = pg.get_backend("cpu")
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    out = np.empty((2, 4))
    pg.clear_plan_cache()
    pg.gemm(a, b, out=out, device="cpu")  # planned (and run through execute)
    executed = []
    monkeypatch.setattr(type(cpu), "execute", lambda self, plan, call: executed.append(call) or np.zeros((2, 4)))
    assert pg.gemm(a, b, out=out, device="cpu") is out and np.array_equal(out, a @ b) and executed == []
    assert np.array_equal(pg.gemm(a, b, device="cpu"), np.zeros((2, 4))) and len(executed) == 1  # planned now: execute
    assert np.array_equal(pg.gemm(a, b, device="cpu"), a @ b) and len(executed) == 1
    lp = pg.last_plan()
    assert lp.cached and (lp.problem.alpha, lp.problem.beta) == (1.0, 0.0)
    pg.gemm(a, b, alpha=2.0, device="cpu")
    pg.gemm(a, b, alpha=2.0, device="cpu")  # scaled: never direct
    assert len(executed) == 3 and pg.last_plan().problem.alpha == 2.0
    big = np.arange(12.0).reshape(3, 4)[:, ::2]  # copied per call into C order: through execute
    pg.gemm(a, big, device="cpu")
    pg.gemm(a, big, device="cpu")
    assert len(executed) == 5


def test_the_last_hit_is_kept_only_until_the_cache_changes():
    """A repeated lookup is answered from the last hit, counted as a hit; after a put, clear or forget it is looked
    up again (a plan dropped with the registry's change is never handed out)."""
    cache = api.plan_cache.PlanCache(4)
    cache.put(("k",), "old")  # type: ignore[arg-type]
    assert cache.get(("k",)) == cache.get(("k",)) == "old" and cache.hits == 2
    cache.forget()
    assert cache.get(("k",)) is None
    cache.put(("k",), "new")  # type: ignore[arg-type]
    assert cache.get(("k",)) == "new" and cache.get(("j",)) is None
    cache.put(("k",), "newer")  # type: ignore[arg-type]
    assert cache.get(("k",)) == "newer"
    cache.clear()
    assert cache.get(("k",)) is None and cache.info()["misses"] == 1


def test_an_input_viewing_out_is_refused_after_a_hit_of_views():
    """Inputs that view arrays of their own (a reshape, a slice) take the cached plan at a glance; one that views
    out itself is refused, whatever the cache holds."""
    a, b = np.ones(16).reshape(4, 4), np.ones((8, 4))[:4]
    out = np.empty((4, 4))
    pg.clear_plan_cache()
    pg.gemm(a, b, out=out, device="cpu")
    pg.gemm(a, b, out=out, device="cpu")
    assert pg.last_plan().cached and np.array_equal(out, np.full((4, 4), 4.0))
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(out.reshape(4, 4), b, out=out, device="cpu")
    with pytest.raises(pg.ArgumentError, match="out overlaps b"):
        pg.gemm(a, out[:, :], out=out, device="cpu")
