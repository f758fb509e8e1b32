"""A cached device call with ``out`` bound on its hit path (on the CPU, CuPy stand-ins): the overlap test, the
stream and the pointers are those the general path gives; an overlap, a new shape, dtype, device or alignment
class leaves the cached plan for the full path."""

from __future__ import annotations

import random
import sys
import types

import numpy as np
import pytest

from polygemm import plan_cache
from polygemm.plan_cache import CacheEntry


class _Planned(Exception):
    """The call went to the full path (normalize, select, plan)."""


def _fake_cupy(monkeypatch):
    fake = types.ModuleType("cupy")

    class ndarray:  # noqa: N801 - CuPy's name
        def __init__(self, ptr, shape, dtype="float16", device=0):
            self.data = types.SimpleNamespace(ptr=ptr, device_id=device)
            self.dtype = np.dtype(dtype)
            self.shape, self.strides = shape, (shape[1] * self.dtype.itemsize, self.dtype.itemsize)
            self.size = shape[0] * shape[1]

    stream = types.SimpleNamespace(ptr=0x5000)
    fake.ndarray = ndarray
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda: stream)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return ndarray, stream


@pytest.fixture
def cache(monkeypatch):
    monkeypatch.setattr(plan_cache, "_cache", plan_cache.PlanCache(64))

    def full(*args, **kw):
        raise _Planned

    monkeypatch.setattr(plan_cache, "_full_plan", full)
    return plan_cache._cache


def _entry(spans, lows=(0, 0, 0, 0)):
    return CacheEntry("backend", "plan", (None, None, None), spans, lows=lows)  # type: ignore[arg-type]


def _cached(cache, a, b, c, out, entry, alpha=1.0, beta=0.0):
    key, _ = plan_cache._key(a, b, c, out, alpha, beta, None, "auto")
    cache.put(key, entry)
    return entry


def test_the_hit_path_binds_as_the_overlap_test_and_streams_say(monkeypatch, cache):
    nd, _ = _fake_cupy(monkeypatch)
    rng = random.Random(7)
    nbytes = 64 * 64 * 2
    taken = {True: 0, False: 0}
    for trial in range(400):
        ptrs = [0x10000 + 0x100 * rng.randrange(0, 400) for _ in range(4)]  # 16-byte classes all 0: one key
        with_c = rng.random() < 0.5
        if with_c and rng.random() < 0.3:
            ptrs[2] = ptrs[3]  # in place
        a, b, out = nd(ptrs[0], (64, 64)), nd(ptrs[1], (64, 64)), nd(ptrs[3], (64, 64))
        c = nd(ptrs[2], (64, 64)) if with_c else None
        spans = (nbytes, nbytes, nbytes if with_c else 0, nbytes)
        lows = (0, 0, 0, 0) if rng.random() < 0.7 else (-rng.randrange(0, 2) * 256, 0, 0, -rng.randrange(0, 2) * 512)
        entry = _cached(cache, a, b, c, out, _entry(spans, lows), 1.0, 0.5)
        _, views = plan_cache._key(a, b, c, out, 1.0, 0.5, None, "auto")
        want = plan_cache._overlap_free(entry, a, b, c, out, list(views))
        try:
            got, call, hit, uncached = plan_cache.bind(a, b, c, 1.0, 0.5, None, "auto", out)
        except _Planned:
            assert not want, (trial, ptrs, lows)
            taken[False] += 1
            continue
        taken[True] += 1
        assert want and got is entry and hit and uncached == "", (trial, ptrs, lows)
        assert (call.a_ptr, call.b_ptr, call.c_ptr, call.out_ptr) == (ptrs[0], ptrs[1], ptrs[2] if with_c else 0, ptrs[3])
        assert (call.a, call.b, call.c, call.out, call.alpha, call.beta, call.stream, call.matched) == (a, b, c, out, 1.0, 0.5, 0x5000, True)
    assert min(taken.values()) > 40, taken  # both ways taken often


def test_an_empty_out_overlaps_nothing_and_a_null_stream_is_the_legacy_one(monkeypatch, cache):
    nd, stream = _fake_cupy(monkeypatch)
    a, b, out = nd(0x10000, (64, 64)), nd(0x10000, (64, 64)), nd(0x10000, (0, 64))
    entry = _cached(cache, a, b, None, out, _entry((8192, 8192, 0, 0)))
    stream.ptr = 0
    entry2 = _cached(cache, a, b, None, out, _entry((8192, 8192, 0, 0)))
    got, call, hit, _ = plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", out)
    assert got is entry2 and entry2 is not entry and hit and call.stream == 1


def test_a_new_shape_dtype_device_or_alignment_leaves_the_cached_plan(monkeypatch, cache):
    nd, _ = _fake_cupy(monkeypatch)
    a, b, out = nd(0x10000, (64, 64)), nd(0x20000, (64, 64)), nd(0x30000, (64, 64))
    entry = _cached(cache, a, b, None, out, _entry((8192, 8192, 0, 8192)))
    assert plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", out)[0] is entry
    for other in (nd(0x30000, (64, 32)), nd(0x30000, (64, 64), "float32"), nd(0x30000, (64, 64), device=1),
                  nd(0x30008, (64, 64))):
        with pytest.raises(_Planned):
            plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", other)
    with pytest.raises(_Planned):  # scalars a float32 cannot hold: another plan
        plan_cache.bind(a, b, None, 1e300, 0.0, None, "auto", out)


def test_operands_on_different_streams_bind_the_several_streams_mark(monkeypatch, cache):
    """CuPy names one current stream for all; a view that names another (a foreign array beside CuPy's) gives -1."""
    nd, _ = _fake_cupy(monkeypatch)
    a, b, out = nd(0x10000, (64, 64)), nd(0x20000, (64, 64)), nd(0x30000, (64, 64))
    entry = _cached(cache, a, b, None, out, _entry((8192, 8192, 0, 8192)))
    real = plan_cache.cupy_views

    def views(*ops):
        va, vb, vc, vo = real(*ops)
        return va, (vb[0], vb[1], 0x7777), vc, vo

    monkeypatch.setattr(plan_cache, "cupy_views", views)
    got, call, hit, _ = plan_cache.bind(a, b, None, 1.0, 0.0, None, "auto", out)
    assert got is entry and call.stream == -1
