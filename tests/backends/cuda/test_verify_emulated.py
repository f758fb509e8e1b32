"""The cuda device check's orchestration (backends/cuda/verify.py: operands read as the kernels walk them,
the scratch laid out, the passes queued, the record read back, the columns found from the other side) on the
CPU: a stand-in runtime whose kernels are NumPy, over host memory posing as device arrays. The kernels
themselves are tested on the GPU (test_verify_gpu.py)."""

from __future__ import annotations

import contextlib
import re
import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest

from polygemm.backend import Plan
from polygemm.backends.cuda import verify as verify_module
from polygemm.backends.cuda.verify import checked_execute, device_check
from polygemm.backends.cuda.verify_geometry import RECORD, Strided, matvec_geometry
from polygemm.core.normalize import normalize
from polygemm.verification.host import row_thresholds

BF16 = np.dtype(ml_dtypes.bfloat16)
_KINDS = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": BF16}


class DeviceLike:
    """Host memory behind a __cuda_array_interface__ (what the check reads of a device array)."""

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = arr
        self.__cuda_array_interface__ = {"shape": arr.shape, "typestr": arr.dtype.str, "version": 3, "strides": arr.strides,
                                          "data": (arr.__array_interface__["data"][0], False), "stream": None}

    @property
    def shape(self) -> tuple[int, ...]:
        return self.arr.shape


def _view(addr: int, dtype: np.dtype, count: int) -> np.ndarray:
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(addr), dtype=dtype)


def _kernels(entries):
    """Launched entries without their walks' suffixes (``pg_verify_matvec_f16_m2`` -> ``pg_verify_matvec_f16``)."""
    return [re.sub(r"_m[0-3]$", "", e) for e in entries]


class FakeKernel:
    """A kernel as the check launches it: its parameters packed by struct codes, unpacked here for NumPy."""

    def __init__(self, run, entry="", launches=None) -> None:
        self.run, self.entry, self.launches = run, entry, launches

    def struct_for(self, codes):
        self.layout = struct.Struct("<" + "".join(codes))
        return self.layout

    def launch(self, buf, grid, block, shared=0, stream=0):
        if self.launches is not None:
            self.launches.append(self.entry)
        self.run(*self.layout.unpack(buf), grid=tuple(grid))

    def launcher(self, grid, block, shared=0):
        return lambda buf, stream: self.launch(buf, grid, block, shared, stream)


class FakeRuntime:
    """The parts of CudaRuntime the check uses, with NumPy kernels on host addresses."""

    name, sms = "emulated GPU", 132

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.cu = self
        self.drv = self
        self.launches: list[str] = []

    def scratch(self, nbytes: int, stream: int) -> int:
        # what a pool hands back holds anything: NaN bytes, so a sum the check reads before it is zeroed or written shows
        buf = np.full(nbytes + 256, 0xFF, np.uint8)
        addr = buf.__array_interface__["data"][0]
        addr += -addr % 256
        self.buffers[addr] = buf
        return addr

    def release(self, ptr: int, stream: int) -> None:
        del self.buffers[ptr]

    def memset_d32_async(self, ptr: int, value: int, count: int, stream: int) -> None:
        _view(ptr, np.dtype(np.uint32), count)[:] = value

    def synchronize_stream(self, stream: int) -> None:
        pass

    def copy_to_host(self, host: np.ndarray, ptr: int) -> None:
        host.view(np.uint8)[:] = _view(ptr, np.dtype(np.uint8), host.nbytes)

    def copy_to_host_async(self, host: np.ndarray, ptr: int, stream: int) -> None:
        self.copy_to_host(host, ptr)

    def copy_device_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self.launches.append("copy")
        _view(dst, np.dtype(np.uint8), nbytes)[:] = _view(src, np.dtype(np.uint8), nbytes)

    #: whether the context maps page-locked memory into the device (the check's last launch then writes the record
    #: there; else it is copied back)
    maps_host = True

    def mapped_zeros(self, shape, dtype) -> tuple[np.ndarray, int]:
        host = np.zeros(shape, dtype)
        return host, host.ctypes.data if self.maps_host else 0

    def enter(self) -> bool:
        return False

    def active(self):
        return contextlib.nullcontext()

    def function(self, source, entry):
        if entry.startswith("pg_verify_matvec_"):
            kind, walk = entry.rsplit("_", 2)[1:]  # ..._f16_m2: the input's kind, the entry of the walk it was built for
            run = self._judge if "_judge_" in entry else self._matvec

            def walked(rows, cols, batch, X, rs, cs, bs, *args, **kw):
                # the launch's matrix is one its entry's walk takes: the walk matvec_geometry chooses for it
                x = Strided(int(X), int(rows), int(cols), int(rs), int(cs), int(bs), kind, int(batch))
                assert walk == f"m{matvec_geometry(x, self.sms)[0]}", (entry, x)
                return run(kind, rows, cols, batch, X, rs, cs, bs, *args, **kw)

            return FakeKernel(walked, entry, self.launches)
        return FakeKernel(getattr(self, "_" + entry.replace("pg_verify_", "")), entry, self.launches)

    def _prepare(self, words, zero, n, seed, r, **kw):
        _view(int(zero), np.dtype(np.uint32), int(words))[:] = 0
        rng = np.random.default_rng(int(seed))
        _view(int(r), np.dtype(np.float32), int(n))[:] = rng.choice([-1.0, 1.0], int(n))

    def _judge(self, kind, rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs, yC, zC, yC0, zC0, *scalars_rec, **kw):
        """The pass over A with each row judged: its sums, then the comparison of every row."""
        total = int(rows) * int(batch)
        ya, za = np.zeros(total, np.float32), np.zeros(total, np.float64)
        self._matvec(kind, rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs, ya.ctypes.data, za.ctypes.data, 0, grid=kw["grid"])
        self._compare(total, yC, zC, ya.ctypes.data, za.ctypes.data, yC0, zC0, *scalars_rec)

    def _matvec(self, kind, rows, cols, batch, X, rs, cs, bs, v, vbs, w, wbs, y, z, norm, **kw):
        """The kernel's sums into y and z (zeroed before: a sliced launch adds its slices, as this adds the whole), and
        the rows' norms into ``norm`` where given and the launch is not sliced."""
        dt = _KINDS[kind]
        rows, cols, batch, rs, cs, bs, vbs, wbs = (int(t) for t in (rows, cols, batch, rs, cs, bs, vbs, wbs))
        span = (batch - 1) * bs + (rows - 1) * rs + (cols - 1) * cs + 1
        flat = _view(int(X), dt, span).astype(np.float64)
        yv, zv = _view(int(y), np.dtype(np.float32), batch * rows), _view(int(z), np.dtype(np.float64), batch * rows)
        for bi in range(batch):
            x = np.lib.stride_tricks.as_strided(flat[bi * bs:], (rows, cols), (rs * 8, cs * 8))
            vv = _view(int(v) + 4 * bi * vbs, np.dtype(np.float32), cols).astype(np.float64)
            yv[bi * rows:(bi + 1) * rows] += (x @ vv).astype(np.float32)
            if int(w):
                ww = _view(int(w) + 4 * bi * wbs, np.dtype(np.float32), cols).astype(np.float64)
                zv[bi * rows:(bi + 1) * rows] += np.abs(x) @ ww
            else:
                zv[bi * rows:(bi + 1) * rows] += np.square(x).sum(1)
        if int(norm) and kw["grid"][1] == 1:
            _view(int(norm), np.dtype(np.float32), batch * rows)[:] = np.sqrt(zv)

    def _norms(self, n, sq, out, **kw):
        _view(int(out), np.dtype(np.float32), int(n))[:] = np.sqrt(_view(int(sq), np.dtype(np.float64), int(n)))

    def _compare(self, total, yC, zC, yA, zA, yC0, zC0, alpha, beta, ka, kc0, kc, t0, out_max, rec, host=0, **kw):
        f = lambda p: _view(int(p), np.dtype(np.float32), int(total)).astype(np.float64)  # noqa: E731
        d = lambda p: _view(int(p), np.dtype(np.float64), int(total))  # noqa: E731
        want, ya = float(alpha) * f(yA), abs(float(alpha)) * d(zA)
        c0a = np.zeros_like(want)
        if int(yC0):
            want, c0a = want + float(beta) * f(yC0), abs(float(beta)) * np.sqrt(d(zC0))
        side = float(ka) * ya + float(kc0) * c0a + float(t0)
        got = f(yC)
        thr = side + float(kc) * np.sqrt(d(zC))
        diff = np.abs(got - want)
        fin = np.isfinite(got)
        unchecked = ~np.isfinite(side) | ~np.isfinite(want) | (~fin & (ya + c0a > float(out_max)))
        failed = ~unchecked & (~fin | ~(diff <= thr))
        out = np.zeros(1, RECORD)
        out["failed"], out["unchecked"] = failed.sum(), unchecked.sum()
        ok = ~failed & ~unchecked & (thr > 0)
        out["worst_bits"] = np.float32(np.max(diff[ok] / thr[ok]) if ok.any() else 0.0).view(np.uint32)
        idx = np.flatnonzero(failed)[:8]
        out["shown"] = len(np.flatnonzero(failed))
        out["index"][0][:len(idx)], out["diff"][0][:len(idx)], out["thr"][0][:len(idx)] = idx, diff[idx], thr[idx]
        _view(int(rec), np.dtype(np.uint8), RECORD.itemsize)[:] = out.view(np.uint8)
        if int(host):  # pgv_publish: the last block hands the record to the host's mapped memory
            _view(int(host), np.dtype(np.uint8), RECORD.itemsize)[:] = out.view(np.uint8)


def _check(a, b, c, result, alpha=1.0, beta=0.0, rt=None):
    da, db, dr = DeviceLike(a), DeviceLike(b), DeviceLike(result)
    dc = DeviceLike(c) if c is not None else None
    p = normalize(da, db, dc, alpha=alpha, beta=beta)
    plan = Plan("cuda", "emulated", "", p)
    rt = rt or FakeRuntime()
    report = device_check(rt, plan, da, db, dc, dr, alpha, beta, 12345, {"backend": "cuda", "variant": "emulated"})
    return report, rt


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("layouts", ["nn", "tn", "nt", "tt"])
def test_a_correct_product_passes_and_one_wrong_element_is_named(rng, dtype, layouts):
    m, n, k = 37, 29, 53
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if layouts[0] == "t":
        a = np.asfortranarray(a)
    if layouts[1] == "t":
        b = np.asfortranarray(b)
    res = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
    report, rt = _check(a, b, None, res)
    assert report is not None and report.ok and report.checked == m and "emulated GPU" in report.where
    kind = "f32" if dtype == np.float32 else "f16"
    # C·r first (C is still in the L2 cache), then B·r with B's norms, A·(B·r) with each row judged: four launches
    assert _kernels(rt.launches[:4]) == ["pg_verify_prepare", f"pg_verify_matvec_{kind}", f"pg_verify_matvec_{kind}",
                                         f"pg_verify_matvec_judge_{kind}"]
    thr = row_thresholds(a, b, None, res, 1.0, 0.0, dtype=np.dtype(dtype), out_dtype=np.dtype(dtype),
                         check_dtype=np.dtype(np.float32), scalar_dtype=np.dtype(np.float32), compensated=True)
    bad = res.copy()
    bad[11, 7] = float(bad[11, 7]) + 3.0 * float(thr[11])
    report, _ = _check(a, b, None, bad)
    assert not report.ok and report.failed == 1
    assert report.rows[0].index == 11 and [f.index for f in report.columns] == [7]


@pytest.mark.parametrize("maps_host", [True, False], ids=["mapped", "copied"])
def test_the_record_comes_back_from_the_last_launch_or_by_a_copy_where_host_memory_is_not_mapped(rng, maps_host):
    """Where the context maps page-locked memory the last launch hands the record over (no copy queued after it); else
    the record is copied back. Either way a failure is found and named."""
    a, b = rng.standard_normal((37, 53)).astype(np.float32), rng.standard_normal((53, 29)).astype(np.float32)
    bad = (a.astype(np.float64) @ b).astype(np.float32)
    bad[5, 3] += 1.0
    rt = FakeRuntime()
    rt.maps_host = maps_host
    copies = []
    rt.copy_to_host_async = lambda host, ptr, stream: (copies.append(ptr), rt.copy_to_host(host, ptr))
    report, _ = _check(a, b, None, bad, rt=rt)
    assert not report.ok and report.rows[0].index == 5
    assert bool(copies) is not maps_host


def test_checks_of_one_layout_are_worked_out_once_and_read_each_calls_arrays(rng):
    rt = FakeRuntime()
    for wrong in (None, (4, 5), None, (17, 0)):
        a = rng.standard_normal((20, 30)).astype(np.float32)
        b = np.asfortranarray(rng.standard_normal((30, 12)).astype(np.float32))
        c = rng.standard_normal((20, 12)).astype(np.float32)
        res = (2.0 * (a.astype(np.float64) @ b) + 0.5 * c).astype(np.float32)
        if wrong is not None:
            res[wrong] += 50.0
        report, _ = _check(a, b, c, res, 2.0, 0.5, rt=rt)
        if wrong is None:
            assert report.ok and report.checked == 20
        else:
            assert not report.ok and report.rows[0].index == wrong[0] and report.columns[0].index == wrong[1]
    # one check along the rows for the four calls (the columns' side of a failed one is made for it alone)
    assert sum(1 for key in verify_module._sides if key[0] is rt) == 1


def test_a_threads_checks_share_one_scratch_and_it_is_given_back_when_the_thread_ends(rng):
    import gc
    import threading

    rt = FakeRuntime()
    taken = []
    scratch = rt.scratch
    rt.scratch = lambda nbytes, stream: taken.append(nbytes) or scratch(nbytes, stream)

    def checks():
        for size in (16, 16, 24, 200):  # the same layout twice, then larger products
            a = rng.standard_normal((size, size)).astype(np.float32)
            res = (a.astype(np.float64) @ a).astype(np.float32)
            report, _ = _check(a, a, None, res, rt=rt)
            assert report.ok

    worker = threading.Thread(target=checks)
    worker.start()
    worker.join()
    # kept between checks: taken again only when a check needs more than the thread holds
    assert 1 <= len(taken) < 4 and taken == sorted(taken)
    del worker
    gc.collect()
    assert not rt.buffers  # the thread's scratch went back with it


def test_a_batch_with_c_and_a_broadcast_b(rng):
    a = rng.standard_normal((3, 16, 24)).astype(np.float32)
    b = rng.standard_normal((24, 10)).astype(np.float32)
    c = rng.standard_normal((3, 16, 10)).astype(np.float32)
    res = (1.5 * (a.astype(np.float64) @ b) - 0.5 * c).astype(np.float32)
    report, _ = _check(a, b, c, res, 1.5, -0.5)
    assert report.ok and report.checked == 48
    res[2, 5, 3] += 10.0
    report, _ = _check(a, b, c, res, 1.5, -0.5)
    assert not report.ok and report.rows[0].batch == (2,) and report.rows[0].index == 5
    assert report.columns[0].batch == (2,) and report.columns[0].index == 3


def test_float64_and_unwalkable_operands_are_left_to_the_host(rng):
    a = rng.standard_normal((8, 8))
    report, _ = _check(a, a, None, a @ a)
    assert report is None


def test_sliced_passes_leave_the_norms_and_the_comparison_to_launches_of_their_own(rng):
    # A of 3 rows of 3000 and B of 3000 rows of 5000: both passes take slices of their rows (added by atomics), so no
    # pass holds a whole row to take its norm or judge it
    a = rng.standard_normal((3, 3000)).astype(np.float32)
    b = rng.standard_normal((3000, 5000)).astype(np.float32)
    res = (a.astype(np.float64) @ b).astype(np.float32)
    report, rt = _check(a, b, None, res)
    assert report.ok and report.checked == 3
    assert rt.launches[:6] == ["pg_verify_prepare", "pg_verify_matvec_f32_m2", "pg_verify_matvec_f32_m2", "pg_verify_norms",
                               "pg_verify_matvec_f32_m2", "pg_verify_compare"]
    res[1, 4321] += 1e4
    report, _ = _check(a, b, None, res)
    assert not report.ok and report.rows[0].index == 1 and [f.index for f in report.columns] == [4321]


def test_rows_left_unchecked_by_a_nan_in_b_are_checked_from_the_columns_side(rng):
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 12)).astype(np.float32)
    b[4, 0] = np.nan
    res = (a.astype(np.float64) @ b).astype(np.float32)
    report, rt = _check(a, b, None, res)
    assert report.ok and report.unchecked == 20 and rt.launches.count("pg_verify_prepare") == 2  # both sides ran
    res[7, 9] += 1e3
    report, _ = _check(a, b, None, res)
    assert not report.ok and report.rows == () and [f.index for f in report.columns] == [9]


# -- a product computed into scratch, checked there and copied into out (checked_execute) ------------------------------

class Bound:
    """What the plan cache binds of a call (polygemm.core.problem.Call's fields, positionally)."""

    def __init__(self, a, b, c, out, a_ptr, b_ptr, c_ptr, out_ptr, alpha, beta, stream, alloc=None, matched=True):
        self.a, self.b, self.c, self.out = a, b, c, out
        self.a_ptr, self.b_ptr, self.c_ptr, self.out_ptr = a_ptr, b_ptr, c_ptr, out_ptr
        self.alpha, self.beta, self.stream = alpha, beta, stream


def _ptr(x):
    return x.__cuda_array_interface__["data"][0] if x is not None else 0


def _product_into(wrong=None, fail=False, seen=None):
    """A stand-in for the backend's execute: alpha·A·B + beta·C (C read where it lies) written at ``call.out_ptr`` with
    out's strides; ``wrong``: one element moved; ``fail``: raises before writing."""

    def execute(plan, call):
        if seen is not None:
            seen.append(call.out_ptr)
        if fail:
            raise RuntimeError("launch failed: CUDA_ERROR_LAUNCH_FAILED")
        a, b, out = call.a.arr, call.b.arr, call.out.arr
        want = call.alpha * (a.astype(np.float64) @ b.astype(np.float64))
        if call.c is not None and call.beta != 0.0:
            want = want + call.beta * call.c.arr.astype(np.float64)  # (c read before anything is written)
        flat = _view(call.out_ptr, out.dtype, out.size)
        dest = np.lib.stride_tricks.as_strided(flat, out.shape, out.strides)
        dest[...] = want.astype(out.dtype)
        if wrong is not None:
            dest[wrong] += 100.0

    return execute


def _checked(a, b, c, out, alpha=1.0, beta=0.0, rt=None, stream=None, **how):
    da, db, dout = DeviceLike(a), DeviceLike(b), DeviceLike(out)
    dc = (dout if c is out else DeviceLike(c)) if c is not None else None
    p = normalize(da, db, dc, alpha=alpha, beta=beta, out=dout)
    plan = Plan("cuda", "emulated", "", p)
    rt = rt or FakeRuntime()
    call = Bound(da, db, dc, dout, _ptr(da), _ptr(db), _ptr(dc), _ptr(dout), alpha, beta, stream)
    checked = checked_execute(_product_into(**how), rt, plan, call, 777, {"backend": "cuda", "variant": "emulated"})
    return checked, rt


def _only_kept(rt) -> bool:
    """Whether ``rt``'s scratch is the default streams' kept blocks alone (and this thread's for the checks of other
    sides), none lent to a call."""
    from polygemm.backends.cuda import verify_scratch

    blocks = verify_scratch.CHECKED_BLOCKS
    kept = {ptr for (owner, _), (ptr, _) in blocks._kept.items() if owner is rt}
    mine = getattr(verify_scratch._pinned, "scratch", {}).get(rt)
    kept |= set() if mine is None else {mine.ptr}
    return set(rt.buffers) == kept and not [key for key in blocks._lent if key[0] is rt]


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_checked_product_goes_into_scratch_and_into_out_only_once_it_passed(rng, order):
    a = rng.standard_normal((33, 40)).astype(np.float16)
    b = rng.standard_normal((40, 21)).astype(np.float16)
    out = np.full((33, 21), 7.0, np.float16, order=order)
    seen: list[int] = []
    checked, rt = _checked(a, b, None, out, seen=seen)
    assert checked.report.ok and checked.report.checked == 33
    assert seen and seen[0] != _ptr(DeviceLike(out))  # computed elsewhere, then copied
    np.testing.assert_allclose(out, (a.astype(np.float64) @ b).astype(np.float16), rtol=1e-2, atol=1e-2)
    assert rt.launches[-1] == "copy" and "pg_verify_prepare" in rt.launches
    assert _only_kept(rt)  # the default stream's block, lent back (the next call's product follows the copy)


def test_checked_calls_on_a_default_stream_reuse_its_block_and_others_take_their_own(rng):
    a = rng.standard_normal((33, 40)).astype(np.float16)
    out = np.zeros((33, 33), np.float16)
    rt = FakeRuntime()
    taken = []
    scratch = rt.scratch
    rt.scratch = lambda nbytes, stream: taken.append(stream) or scratch(nbytes, stream)
    for stream in (None, None, 1, 1):  # the null stream and the legacy default stream: one block each, kept
        checked, _ = _checked(a, a.T.copy(), None, out, rt=rt, stream=stream)
        assert checked.report.ok
    assert taken == [0, 1] and _only_kept(rt) and len(rt.buffers) == 2
    checked, _ = _checked(a, a.T.copy(), None, out, rt=rt, stream=0x7000)  # a stream the caller may destroy
    assert checked.report.ok and taken[-1] == 0x7000 and _only_kept(rt) and len(rt.buffers) == 2


def test_a_product_that_fails_its_check_leaves_out_and_c_as_they_were(rng):
    a = rng.standard_normal((24, 16)).astype(np.float32)
    b = rng.standard_normal((16, 18)).astype(np.float32)
    c = rng.standard_normal((24, 18)).astype(np.float32)
    out = np.full((24, 18), -3.0, np.float32)
    c_before = c.copy()
    seen: list[int] = []
    checked, rt = _checked(a, b, c, out, 2.0, 0.5, wrong=(5, 9), seen=seen)
    report = checked.report
    assert not report.ok and report.rows[0].index == 5 and report.columns[0].index == 9
    assert (out == -3.0).all() and np.array_equal(c, c_before) and "copy" not in rt.launches
    assert seen[0] in rt.buffers and not _only_kept(rt)  # lent until the caller decides: delivered all the same
    checked.deliver()                                      # (verify="warn") or given back
    assert out[5, 9] != -3.0 and _only_kept(rt)
    checked.close()  # (nothing left to give back)


def test_c_in_place_is_read_before_the_checked_product_replaces_it(rng):
    a = rng.standard_normal((20, 12)).astype(np.float32)
    b = rng.standard_normal((12, 20)).astype(np.float32)
    out = rng.standard_normal((20, 20)).astype(np.float32)
    want = 1.5 * (a.astype(np.float64) @ b) + 2.0 * out
    checked, _ = _checked(a, b, out, out, 1.5, 2.0)
    assert checked.report.ok
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    bad = out.copy()
    checked, _ = _checked(a, b, out, out, 1.5, 2.0, wrong=(3, 3))
    assert not checked.report.ok and np.array_equal(out, bad)  # in place: c is out, and both are as they were
    checked.close()


def test_a_launch_that_fails_gives_the_scratch_back_and_leaves_out(rng):
    a = rng.standard_normal((8, 8)).astype(np.float32)
    out = np.zeros((8, 8), np.float32)
    rt = FakeRuntime()
    with pytest.raises(RuntimeError, match="CUDA_ERROR_LAUNCH_FAILED"):
        _checked(a, a, None, out, rt=rt, fail=True)
    assert _only_kept(rt) and not out.any()


def test_an_out_with_gaps_is_left_to_a_result_of_its_own(rng):
    # a view of every other column: its span holds elements that are not out's, which one copy would overwrite
    a = rng.standard_normal((10, 6)).astype(np.float32)
    b = rng.standard_normal((6, 8)).astype(np.float32)
    wide = np.zeros((10, 16), np.float32)
    checked, rt = _checked(a, b, None, wide[:, :8])
    assert checked is None and not rt.launches and not wide.any()


def test_the_checked_call_of_one_plan_is_worked_out_once(rng):
    a = rng.standard_normal((12, 12)).astype(np.float32)
    out = np.zeros((12, 12), np.float32)
    da, dout = DeviceLike(a), DeviceLike(out)
    plan = Plan("cuda", "emulated", "", normalize(da, da, None, out=dout))
    rt = FakeRuntime()
    before = len(verify_module._planned)
    for _ in range(3):
        call = Bound(da, da, None, dout, _ptr(da), _ptr(da), 0, _ptr(dout), 1.0, 0.0, None)
        assert checked_execute(_product_into(), rt, plan, call, 5, {}).report.ok
    assert len(verify_module._planned) == before + 1
