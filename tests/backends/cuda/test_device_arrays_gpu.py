"""CuPy and torch device arrays on the cuda backend (marked ``cuda``): kinds, out=, views, streams."""

from __future__ import annotations

import contextlib
import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.problem import bfloat16
from polygemm.testing import reference_for

from tests.helpers import DLPackOnly, cuda_or_skip


BF16 = bfloat16()


@pytest.fixture(scope="module")
def cuda():
    return cuda_or_skip()


@pytest.fixture(scope="module")
def cuda80():
    return cuda_or_skip((8, 0), "float16/bfloat16 tensor-core kernels")


class Lib:
    """CuPy or torch behind one small interface: NumPy <-> device, fills, dtypes, views."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "cupy":
            self.xp = pytest.importorskip("cupy")
        else:
            torch = pytest.importorskip("torch")
            if not torch.cuda.is_available():
                pytest.skip("torch sees no CUDA device")
            self.xp = torch

    @property
    def cupy(self) -> bool:
        return self.name == "cupy"

    @property
    def array_type(self):
        return self.xp.ndarray if self.cupy else self.xp.Tensor

    def has(self, dt) -> bool:
        return not (self.cupy and np.dtype(dt) == BF16)

    def dtype(self, dt):
        """The library's spelling of NumPy dtype ``dt`` (what a user passes as out_dtype)."""
        dt = np.dtype(dt)
        return dt if self.cupy else getattr(self.xp, dt.name)

    def np_dtype(self, x) -> np.dtype:
        return np.dtype(x.dtype) if self.cupy else np.dtype(BF16 if x.dtype == self.xp.bfloat16 else str(x.dtype).split(".")[-1])

    def to(self, x):
        """NumPy ``x`` on the device, C-ordered."""
        x = np.ascontiguousarray(x)
        if self.cupy:
            return self.xp.asarray(x)
        if x.dtype == BF16:
            return self.xp.from_numpy(x.view(np.int16)).view(self.xp.bfloat16).cuda()
        return self.xp.from_numpy(x).cuda()

    def to_f(self, x):
        """NumPy matrix ``x`` on the device as a column-major (transposed C-order) view."""
        return self.mT(self.to(np.swapaxes(x, -1, -2)))

    def mT(self, x):
        return self.xp.swapaxes(x, -1, -2) if self.cupy else x.transpose(-1, -2)

    def host(self, x) -> np.ndarray:
        if self.cupy:
            return self.xp.asnumpy(x)
        t = x.detach().cpu()
        if t.dtype == self.xp.bfloat16:
            return t.contiguous().view(self.xp.int16).numpy().view(BF16)
        return t.numpy()

    def full(self, shape, value, dt):
        if self.cupy:
            return self.xp.full(shape, value, dtype=np.dtype(dt))
        return self.xp.full(shape, value, dtype=self.dtype(dt), device="cuda")

    def broadcast(self, x, shape):
        return self.xp.broadcast_to(x, shape) if self.cupy else x.expand(*shape)

    def device_of(self, x):
        return x.device.id if self.cupy else x.device

    def c_contiguous(self, x) -> bool:
        return bool(x.flags.c_contiguous) if self.cupy else x.is_contiguous()

    def sync(self) -> None:
        if self.cupy:
            self.xp.cuda.Device().synchronize()
        else:
            self.xp.cuda.synchronize()


@pytest.fixture(params=["cupy", "torch"])
def lib(request, cuda) -> Lib:
    return Lib(request.param)


def rand(rng: np.random.Generator, shape, dt=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dt)


def check(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None, what=""):
    """``got`` (host) against the float64 reference of ``alpha * a @ b + beta * c`` matrix by matrix,
    batches broadcast as numpy.matmul does; the reference is rounded to ``got``'s dtype unless
    ``out_dtype`` says otherwise (dtypes are asserted by the tests themselves)."""
    got, a, b = np.asarray(got), np.asarray(a), np.asarray(b)
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    shape = batch + (a.shape[-2], b.shape[-1])
    assert got.shape == shape, f"{what}: result shape {got.shape}, expected {shape}"
    A, B = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
    C = None if c is None else np.broadcast_to(np.asarray(c), shape)
    for i in np.ndindex(*batch):
        ref = reference_for(A[i], B[i], None if C is None else C[i], alpha, beta,
                            out_dtype=got.dtype if out_dtype is None else out_dtype)
        res = ref.compare(got[i])
        assert res.ok, f"{what} matrix {i}: {res.message}"


SENTINEL = 7.0  # exact in float16, bfloat16 and float32


class CudaArrayOnly:
    """A device array that offers nothing but ``__cuda_array_interface__`` (version 2: it names no
    stream), as a custom allocator's or an older library's arrays do. ``shift`` moves the pointer
    by bytes, ``strides`` replaces the strides, ``readonly`` marks the data read-only."""

    def __init__(self, x, *, shift: int = 0, strides=None, readonly: bool = False) -> None:
        iface = dict(x.__cuda_array_interface__)
        iface.pop("stream", None)
        ptr, _ = iface["data"]
        iface["data"] = (int(ptr) + shift, readonly)
        if strides is not None:
            iface["strides"] = strides
        iface["version"] = 2
        self._keep = x
        self.__cuda_array_interface__ = iface


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.shape == y.shape and x.dtype == y.dtype and x.view(np.uint8).tobytes() == y.view(np.uint8).tobytes()


#: clock cycles a spin kernel holds a stream (~50 ms on an H200): long beside one call's host path
SPIN_CYCLES = 100_000_000


_SPIN_SRC = r"""
extern "C" __global__ void pg_spin_cycles(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


_spin_kernels: dict = {}


def cupy_spin(cp) -> None:
    """Hold CuPy's current stream busy for SPIN_CYCLES (one thread spinning)."""
    kernel = _spin_kernels.get("cupy")
    if kernel is None:
        kernel = _spin_kernels["cupy"] = cp.RawKernel(_SPIN_SRC, "pg_spin_cycles")
    kernel((1,), (1,), (np.int64(SPIN_CYCLES),))


@pytest.mark.cuda
def test_new_results_keep_the_inputs_kind_device_and_dtype(lib, cuda80, rng):
    """A new result is an array of the inputs' library on their device, C-ordered, of the inputs'
    dtype, or of out_dtype (spelled as the library spells it) for float16/bfloat16 inputs."""
    m, k, n = 96, 80, 112
    for dt, od in ((np.float32, None), (np.float16, None), (np.float16, np.float32), (BF16, None), (BF16, np.float32)):
        if not lib.has(dt):
            continue
        a, b = rand(rng, (m, k), dt), rand(rng, (k, n), dt)
        da, db = lib.to(a), lib.to(b)
        kw = {} if od is None else {"out_dtype": lib.dtype(od)}
        got = pg.gemm(da, db, device="cuda", **kw)
        what = f"{lib.name} {np.dtype(dt).name} out_dtype={od}"
        assert isinstance(got, lib.array_type), f"{what}: got a {type(got).__name__}"
        assert lib.device_of(got) == lib.device_of(da), what
        assert lib.np_dtype(got) == np.dtype(od or dt), f"{what}: dtype {got.dtype}"
        assert lib.c_contiguous(got), what
        if not lib.cupy:
            assert not got.requires_grad, what
        check(lib.host(got), a, b, what=what)


@pytest.mark.cuda
def test_out_is_written_in_place_and_is_what_comes_back(lib, cuda80, rng):
    """``out=`` (2-D and 3-D, the inputs' dtype or float32 for float16) receives the result and is
    the object returned, from gemm and from matmul."""
    m, k, n = 72, 56, 88
    for dt, od, batch in ((np.float32, np.float32, ()), (np.float16, np.float16, (3,)), (np.float16, np.float32, (2,))):
        a, b = rand(rng, batch + (m, k), dt), rand(rng, batch + (k, n), dt)
        da, db = lib.to(a), lib.to(b)
        out = lib.full(batch + (m, n), np.nan, od)
        assert pg.gemm(da, db, out=out, device="cuda") is out
        check(lib.host(out), a, b, what=f"gemm out {np.dtype(od).name} batch={batch}")
        out2 = lib.full(batch + (m, n), np.nan, od)
        assert pg.matmul(da, db, out=out2, device="cuda") is out2
        check(lib.host(out2), a, b, what=f"matmul out {np.dtype(od).name} batch={batch}")


@pytest.mark.cuda
def test_transposed_views_are_used_as_they_are(lib, cuda80, rng):
    """Column-major (transposed) a, b, c and out: read and written in place, no copy in the plan."""
    m, k, n = 80, 64, 48
    for dt in (np.float32, np.float16):
        a, b, c = rand(rng, (m, k), dt), rand(rng, (k, n), dt), rand(rng, (m, n), dt)
        da, db, dc = lib.to_f(a), lib.to_f(b), lib.to_f(c)
        out = lib.mT(lib.full((n, m), np.nan, dt))
        assert pg.explain(da, db, dc, alpha=0.5, beta=-1.0, out=out, device="cuda").copies == []
        assert pg.gemm(da, db, dc, alpha=0.5, beta=-1.0, out=out, device="cuda") is out
        check(lib.host(out), a, b, c, 0.5, -1.0, what=f"{np.dtype(dt).name} all column-major")
        check(lib.host(pg.gemm(da, db, device="cuda")), a, b, what=f"{np.dtype(dt).name} new result of column-major operands")


@pytest.mark.cuda
def test_row_stepped_and_offset_views_leave_everything_around_them_untouched(lib, cuda80, rng):
    """a = big[::2, 1:], b and c offset views, out every other row of a sentinel-filled buffer at
    an odd offset: the result is right, and no element of out's buffer outside the view moves."""
    m, k, n = 67, 45, 38
    for dt in (np.float32, np.float16):
        big_a, big_b, big_c = rand(rng, (2 * m, k + 1), dt), rand(rng, (k + 2, n + 3), dt), rand(rng, (m + 1, n + 1), dt)
        a, b, c = big_a[::2, 1:], big_b[2:, 3:], big_c[1:, 1:]
        va, vb, vc = lib.to(big_a)[::2, 1:], lib.to(big_b)[2:, 3:], lib.to(big_c)[1:, 1:]
        big_o = lib.full((2 * m + 1, n + 5), SENTINEL, dt)
        vo = big_o[1::2, 2:2 + n]
        assert pg.gemm(va, vb, vc, alpha=0.5, beta=-1.5, out=vo, device="cuda") is vo
        host = lib.host(big_o)
        outside = np.ones(host.shape, bool)
        outside[1::2, 2:2 + n] = False
        assert (host[outside] == SENTINEL).all(), f"{np.dtype(dt).name}: elements outside out's view were written"
        check(host[1::2, 2:2 + n], a, b, c, 0.5, -1.5, what=f"{np.dtype(dt).name} stepped/offset views")
        check(lib.host(pg.gemm(va, vb, device="cuda")), a, b, what=f"{np.dtype(dt).name} new result")


@pytest.mark.cuda
def test_an_out_of_strides_no_kernel_writes_is_written_through_its_own_library(lib, cuda80, rng):
    """out = big[:, ::2] (and a Fortran-ordered stack) of CuPy or torch: written as numpy.matmul writes such an out,
    through a C-ordered array of out's library copied into it; nothing else in big moves; c as that out accumulates;
    verify= checks it; last_plan says so. One matrix broadcast over a batch as out is refused."""
    m, k, n = 37, 24, 29
    for dt in (np.float32, np.float16):
        a, b, c = rand(rng, (m, k), dt), rand(rng, (k, n), dt), rand(rng, (m, n), dt)
        big = lib.full((m, 2 * n), SENTINEL, dt)
        out = big[:, ::2]
        assert pg.gemm(lib.to(a), lib.to(b), out=out, device="cuda") is out
        assert any("C-ordered array of out's shape" in note for note in pg.last_plan().notes)
        host = lib.host(big)
        assert (host[:, 1::2] == SENTINEL).all(), "elements between out's were written"
        check(host[:, ::2], a, b, what=f"{np.dtype(dt).name} out[:, ::2]")
        big[:, ::2] = lib.to(c)
        assert pg.gemm(lib.to(a), lib.to(b), out, alpha=0.5, beta=2.0, out=out, device="cuda", verify="raise") is out
        check(lib.host(big)[:, ::2], a, b, c, 0.5, 2.0, what=f"{np.dtype(dt).name} c as out[:, ::2], verified")
    sa, sb = rand(rng, (3, m, k), np.float32), rand(rng, (3, k, n), np.float32)
    whole = lib.full((n, m, 3), SENTINEL, np.float32)
    stack = whole.transpose(2, 1, 0) if lib.cupy else whole.permute(2, 1, 0)  # (3, m, n), Fortran-ordered
    assert pg.matmul(lib.to(sa), lib.to(sb), out=stack, device="cuda") is stack
    check(lib.host(stack), sa, sb, what="a Fortran-ordered stack as out")
    one = lib.broadcast(lib.full((1, m, n), SENTINEL, np.float32), (3, m, n))
    with pytest.raises(pg.ArgumentError):
        pg.gemm(lib.to(sa), lib.to(sb), out=one, device="cuda")
    assert (lib.host(one) == SENTINEL).all()


@pytest.mark.cuda
def test_device_views_of_other_strides_are_copied_by_their_own_library(cuda, rng):
    """A CuPy or torch view whose matrices are neither row- nor column-major (a[:, ::2], a[::-1],
    b[:, ::-1], torch b[:, ::2]) is made contiguous by its own library and computed, and explain
    says so (as host views are copied once); the same view offered only through
    __cuda_array_interface__ (no library to copy it) is refused naming it."""
    m, k, n = 40, 24, 36
    a_full, b_full = rand(rng, (m, 2 * k)), rand(rng, (k, 2 * n))
    cases = []
    try:
        cp = pytest.importorskip("cupy")
        da_full, db_full = cp.asarray(a_full), cp.asarray(b_full)
        cases += [("a", "cupy a[:, ::2]", da_full[:, ::2], db_full[:, :n], a_full[:, ::2], b_full[:, :n]),
                  ("a", "cupy a[::-1]", da_full[::-1, :k], db_full[:, :n], a_full[::-1, :k], b_full[:, :n]),
                  ("b", "cupy b[:, ::-1]", da_full[:, :k], db_full[:, ::-1][:, :n], a_full[:, :k], b_full[:, ::-1][:, :n])]
    except pytest.skip.Exception:
        pass
    try:
        tlib = Lib("torch")
        ta_full, tb_full = tlib.to(a_full), tlib.to(b_full)
        cases.append(("b", "torch b[:, ::2]", ta_full[:, :k], tb_full[:, ::2], a_full[:, :k], b_full[:, ::2]))
    except pytest.skip.Exception:
        pass
    if not cases:
        pytest.skip("needs CuPy or torch with CUDA")
    for name, what, x, y, hx, hy in cases:
        got = pg.gemm(x, y, device="cuda")
        assert type(got) is type(x), what
        assert any(c.startswith(f"{name} (a device array") for c in pg.last_plan().copies), (what, pg.last_plan().copies)
        host = got.get() if hasattr(got, "get") else got.cpu().numpy()
        res = reference_for(hx, hy).compare(host)
        assert res.ok, f"{what}: {res.message}"
        said = pg.explain(x, y, device="cuda").copies
        assert any(c.startswith(f"{name} (a device array") for c in said), (what, said)
    if any(w.startswith("cupy") for _, w, *_ in cases):
        only = CudaArrayOnly(da_full[:, ::2])
        with pytest.raises(pg.ArgumentError, match=r"^a is a cuda array with strides .* neither row- nor column-major.*"
                                                   r"not other device arrays"):
            pg.gemm(only, db_full[:, :n], device="cuda")


@pytest.mark.cuda
def test_zero_size_products_keep_kind_shape_and_dtype(lib, cuda, rng):
    """M = 0, N = 0 and an empty batch: an empty array of the inputs' kind, shape and dtype; an
    empty ``out`` is returned as it is."""
    k = 8
    for sa, sb in (((0, k), (k, 5)), ((6, k), (k, 0)), ((0, 4, k), (k, 5))):
        got = pg.gemm(lib.to(np.zeros(sa, np.float32)), lib.to(np.zeros(sb, np.float32)), device="cuda")
        want = tuple(np.broadcast_shapes(sa[:-2], sb[:-2])) + (sa[-2], sb[-1])
        assert isinstance(got, lib.array_type) and tuple(got.shape) == want, (sa, sb, type(got), got.shape)
        assert lib.np_dtype(got) == np.float32
    out = lib.full((0, 5), np.nan, np.float32)
    assert pg.gemm(lib.to(np.zeros((0, k), np.float32)), lib.to(np.ones((k, 5), np.float32)), out=out, device="cuda") is out


@pytest.mark.cuda
def test_k_zero_is_beta_times_c_and_zeros_without_it(lib, cuda80, rng):
    """K = 0: the result is beta * c (README), zeros without c or with beta = 0 (c not read, even
    when it is NaN), into a NaN-poisoned out as into a new result; float16 inputs with a float32 c."""
    m, n = 33, 17
    for dt in (np.float32, np.float16):
        a0, b0 = np.zeros((m, 0), dt), np.zeros((0, n), dt)
        da0, db0 = lib.to(a0), lib.to(b0)
        c = rand(rng, (m, n), dt)
        got = pg.gemm(da0, db0, lib.to(c), beta=2.5, device="cuda")
        assert lib.np_dtype(got) == np.dtype(dt)
        check(lib.host(got), a0, b0, c, 1.0, 2.5, what=f"{np.dtype(dt).name} K=0 beta*c")
        out = lib.full((m, n), np.nan, dt)
        assert pg.gemm(da0, db0, out=out, device="cuda") is out
        assert (lib.host(out) == 0).all(), f"{np.dtype(dt).name} K=0 without c left {lib.host(out)[0, :4]}"
        out = lib.full((m, n), np.nan, dt)
        pg.gemm(da0, db0, lib.full((m, n), np.nan, dt), beta=0.0, out=out, device="cuda")
        assert (lib.host(out) == 0).all(), f"{np.dtype(dt).name} K=0 with beta=0 read c"
        assert (lib.host(pg.gemm(da0, db0, device="cuda")) == 0).all(), f"{np.dtype(dt).name} K=0 new result"
    c32 = rand(rng, (m, n), np.float32)
    a0, b0 = np.zeros((m, 0), np.float16), np.zeros((0, n), np.float16)
    got = pg.gemm(lib.to(a0), lib.to(b0), lib.to(c32), beta=-0.5, out_dtype=lib.dtype(np.float32), device="cuda")
    assert lib.np_dtype(got) == np.float32
    check(lib.host(got), a0, b0, c32, 1.0, -0.5, what="float16 K=0 into float32")


@pytest.mark.cuda
def test_c_as_out_accumulates_in_place_over_repeated_calls(lib, cuda80, rng):
    """out=c with beta != 0 (README: "out may be c (in place)"): a 3-D float16 batch into a float32
    c, three times (planned, then cached), each call reading what the last one wrote."""
    bt, m, k, n = 3, 64, 48, 80
    a, b = rand(rng, (bt, m, k), np.float16), rand(rng, (bt, k, n), np.float16)
    c = rand(rng, (bt, m, n), np.float32)
    da, db, dc = lib.to(a), lib.to(b), lib.to(c)
    for i, (alpha, beta) in enumerate(((0.5, -1.0), (1.0, 1.0), (-0.25, 0.5))):
        before = lib.host(dc)
        assert pg.gemm(da, db, dc, alpha=alpha, beta=beta, out=dc, device="cuda") is dc
        check(lib.host(dc), a, b, before, alpha, beta, out_dtype=np.float32, what=f"call {i}")


@pytest.mark.cuda
def test_out_as_another_view_of_c_is_the_in_place_update(lib, cuda, rng):
    """out a different object over c's memory (c[:], a column-major c's view too) is in place:
    the plan says so and the result is alpha * a @ b + beta * c."""
    m, k, n = 50, 40, 60
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    da, db = lib.to(a), lib.to(b)
    for order in ("C", "F"):
        c = rand(rng, (m, n))
        dc = lib.to(c) if order == "C" else lib.to_f(c)
        out = dc[:]
        assert out is not dc
        assert pg.explain(da, db, dc, beta=0.75, out=out, device="cuda").problem.in_place, order
        assert pg.gemm(da, db, dc, alpha=-1.0, beta=0.75, out=out, device="cuda") is out
        check(lib.host(dc), a, b, c, -1.0, 0.75, what=f"{order}-ordered c, out=c[:]")


@pytest.mark.cuda
def test_c_is_not_read_when_beta_is_zero(lib, cuda80, rng):
    """README: "c is not read when beta == 0": a NaN-filled c gives a finite, correct result, as a
    new array and in place (out=c)."""
    m, k, n = 64, 96, 40
    for dt in (np.float32, np.float16):
        a, b = rand(rng, (m, k), dt), rand(rng, (k, n), dt)
        da, db = lib.to(a), lib.to(b)
        dc = lib.full((m, n), np.nan, dt)
        check(lib.host(pg.gemm(da, db, dc, alpha=2.0, beta=0.0, device="cuda")), a, b, None, 2.0,
              what=f"{np.dtype(dt).name} NaN c, beta=0, new result")
        assert pg.gemm(da, db, dc, alpha=2.0, beta=0.0, out=dc, device="cuda") is dc
        check(lib.host(dc), a, b, None, 2.0, what=f"{np.dtype(dt).name} NaN c, beta=0, out=c")


@pytest.mark.cuda
def test_out_overlapping_a_or_b_is_refused_and_nothing_is_written(lib, cuda, rng):
    """out may be c, not a or b (the error says so): out is a, out is b, out over part of a's
    buffer, also when a plan for these shapes is cached (the repeated call's overlap check);
    the inputs are left as they were."""
    m = k = n = 64
    x, y = rand(rng, (m, k)), rand(rng, (k, n))
    dx, dy = lib.to(x), lib.to(y)
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(dx, dy, out=dx, device="cuda")
    with pytest.raises(pg.ArgumentError, match="out overlaps b"):
        pg.gemm(dy, dx, out=dx, device="cuda")
    assert same_bits(lib.host(dx), x) and same_bits(lib.host(dy), y)
    buf = rand(rng, (2 * m, k))
    dbuf = lib.to(buf)
    clean = lib.full((m, n), np.nan, np.float32)
    pg.gemm(dbuf[:m], dy, out=clean, device="cuda")  # planned and cached for these strides
    with pytest.raises(pg.ArgumentError, match="out overlaps a"):
        pg.gemm(dbuf[:m], dy, out=dbuf[m - 1:2 * m - 1], device="cuda")
    assert same_bits(lib.host(dbuf), buf)


@pytest.mark.cuda
def test_out_partly_overlapping_c_is_refused(lib, cuda, rng):
    """out over part of c (shifted a row, or c's transpose: the same pointer, another layout) is
    refused, after a cached plan for the same strides too; c is left as it was."""
    m = k = n = 64
    a, b = lib.to(rand(rng, (m, k))), lib.to(rand(rng, (k, n)))
    buf = rand(rng, (m + 1, n))
    dbuf = lib.to(buf)
    other = lib.full((m + 1, n), np.nan, np.float32)
    pg.gemm(a, b, dbuf[:m], beta=1.0, out=other[1:], device="cuda")  # planned and cached
    with pytest.raises(pg.ArgumentError, match="out partly overlaps c"):
        pg.gemm(a, b, dbuf[:m], beta=1.0, out=dbuf[1:], device="cuda")
    assert same_bits(lib.host(dbuf), buf)
    c = rand(rng, (m, n))
    dc = lib.to(c)
    with pytest.raises(pg.ArgumentError, match="out partly overlaps c"):
        pg.gemm(a, b, dc, beta=1.0, out=lib.mT(dc), device="cuda")
    assert same_bits(lib.host(dc), c)


@pytest.mark.cuda
def test_inputs_may_share_memory_with_each_other_and_with_c(lib, cuda, rng):
    """Only out is written: a and b may be one buffer (x @ x.T, a Gram matrix) and c may be a or b."""
    m, k = 96, 64
    x = rand(rng, (m, k))
    dx = lib.to(x)
    check(lib.host(pg.gemm(dx, lib.mT(dx), device="cuda")), x, x.T, what="x @ x.T")
    s = rand(rng, (k, k))
    ds = lib.to(s)
    check(lib.host(pg.gemm(ds, ds, ds, alpha=0.5, beta=2.0, device="cuda")), s, s, s, 0.5, 2.0, what="s @ s with c=s")
    out = lib.full((k, k), np.nan, np.float32)
    pg.gemm(ds, lib.mT(ds), ds, beta=1.0, out=out, device="cuda")
    check(lib.host(out), s, s.T, s, 1.0, 1.0, what="s @ s.T + s into out")
    assert same_bits(lib.host(ds), s)


@pytest.mark.cuda
def test_a_host_out_for_device_inputs_is_refused_naming_out(lib, cuda, rng):
    """A NumPy out (and a torch CPU tensor) for device inputs: ArgumentError naming out on host;
    the host array is not written."""
    m, k, n = 20, 12, 16
    da, db = lib.to(rand(rng, (m, k))), lib.to(rand(rng, (k, n)))
    host_out = np.full((m, n), SENTINEL, np.float32)
    with pytest.raises(pg.ArgumentError, match=r"out on host"):
        pg.gemm(da, db, out=host_out, device="cuda")
    assert (host_out == SENTINEL).all()
    if not lib.cupy:
        cpu_out = lib.xp.full((m, n), SENTINEL)
        with pytest.raises(pg.ArgumentError, match=r"out on host"):
            pg.gemm(da, db, out=cpu_out, device="cuda")
        assert bool((cpu_out == SENTINEL).all())


@pytest.mark.cuda
def test_host_and_device_operands_in_one_call_are_refused_naming_each(lib, cuda, rng):
    m, k, n = 20, 12, 16
    a, b, c = rand(rng, (m, k)), rand(rng, (k, n)), rand(rng, (m, n))
    da, db = lib.to(a), lib.to(b)
    with pytest.raises(pg.ArgumentError, match=r"a on host, b on cuda"):
        pg.gemm(a, db, device="cuda")
    with pytest.raises(pg.ArgumentError, match=r"c on host"):
        pg.gemm(da, db, c, beta=1.0, device="cuda")
    with pytest.raises(pg.ArgumentError, match=r"a on host, b on cuda"):
        pg.matmul(a[0], db)
    if not lib.cupy:  # a torch CPU tensor beside a CUDA one
        with pytest.raises(pg.ArgumentError, match=r"a on host, b on cuda"):
            pg.gemm(lib.xp.from_numpy(a), db)


@pytest.mark.cuda
def test_device_cpu_refuses_device_arrays_without_falling_back(lib, cuda, rng):
    """README: an explicit device never falls back; cpu cannot take CUDA data (a ValueError subclass
    that says where the operands are)."""
    da, db = lib.to(rand(rng, (8, 4))), lib.to(rand(rng, (4, 6)))
    with pytest.raises(pg.UnsupportedProblemError, match="cannot take operands on cuda") as info:
        pg.gemm(da, db, device="cpu")
    assert isinstance(info.value, ValueError)


@pytest.mark.cuda
def test_out_or_c_on_another_gpu_is_refused_naming_it(cuda, rng):
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")
    m, k, n = 32, 16, 24
    a, b, c = rand(rng, (m, k)), rand(rng, (k, n)), rand(rng, (m, n))
    with cp.cuda.Device(0):
        da, db = cp.asarray(a), cp.asarray(b)
    with cp.cuda.Device(1):
        out1, c1 = cp.full((m, n), SENTINEL, cp.float32), cp.asarray(c)
    with pytest.raises(pg.ArgumentError, match=r"out on cuda:1"):
        pg.gemm(da, db, out=out1, device="cuda")
    with pytest.raises(pg.ArgumentError, match=r"c on cuda:1"):
        pg.gemm(da, db, c1, beta=1.0, device="cuda")
    with cp.cuda.Device(1):
        assert (cp.asnumpy(out1) == SENTINEL).all() and same_bits(cp.asnumpy(c1), c)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_unsupported_device_dtypes_are_dtype_errors_naming_the_way_on(lib, cuda, rng, dtype):
    """Integer and bool device arrays (complex ones it computes: test_complex_gpu.py): cuda refuses them (DTypeError, a TypeError) naming the dtype and
    device='cpu' on host copies, and no cast that changes their values; beside float32 arrays, the pair is told the
    dtype numpy.matmul computes it in; an out of such a dtype, the result's dtype."""
    good_a, good_b = lib.to(rand(rng, (4, 3))), lib.to(rand(rng, (3, 5)))
    bad_a, bad_b = lib.to(np.ones((4, 3), dtype)), lib.to(np.ones((3, 5), dtype))
    for device in ("cuda", None):
        with pytest.raises(pg.DTypeError) as info:
            pg.gemm(bad_a, bad_b, device=device)
        msg = str(info.value)
        assert isinstance(info.value, TypeError) and dtype in msg and "device='cpu'" in msg and "host copies" in msg, msg
        if dtype != "bool":  # bool's logical product may go through float32 (result > 0); no other dtype here fits it
            assert "astype(np.float32)" not in msg and "torch.float32" not in msg, msg
    with pytest.raises(pg.DTypeError, match="must share one dtype"):
        pg.gemm(bad_a, good_b, device="cuda")
    out = lib.to(np.zeros((4, 5), dtype))
    with pytest.raises(pg.DTypeError, match=r"result dtype must be float32; got out"):
        pg.gemm(good_a, good_b, out=out, device="cuda")


@pytest.mark.cuda
@pytest.mark.parametrize("device", ["cuda", "auto"])
def test_float64_device_arrays_are_computed_on_the_gpu(lib, cuda80, rng, device):
    """float64 device arrays run on the FP64 tensor-core rungs (kernels/dgemm), with device="cuda"
    and with device="auto" (no copy to the host and back), into a float64 result of the library's kind."""
    a, b = rand(rng, (8, 4), np.float64), rand(rng, (4, 6), np.float64)
    got = pg.gemm(lib.to(a), lib.to(b), device=device)
    plan = pg.last_plan()
    # a float64 rung (the DMMA ladder's, or a skinny one for a product this thin), not a copy to the host and back
    assert plan.backend == "cuda" and "float64" in kernel_specs()[plan.variant.split(":")[0]].dtypes, str(plan)
    host = lib.host(got)
    assert host.dtype == np.float64 and reference_for(a, b).compare(host).ok


@pytest.mark.cuda
def test_out_of_another_dtype_is_refused_naming_out(lib, cuda80, rng):
    """out's dtype must be the result's (the inputs', or float32 for float16): otherwise DTypeError
    naming out, and out is not written."""
    m, k, n = 24, 16, 20
    for dt, out_dt, says in ((np.float32, np.float16, r"got out float16"), (np.float16, np.float64, r"got out float64"),
                             (np.float32, np.float64, r"got out float64"), (np.float32, np.int32, r"got out int32")):
        da, db = lib.to(rand(rng, (m, k), dt)), lib.to(rand(rng, (k, n), dt))
        out = lib.to(np.full((m, n), SENTINEL, out_dt))
        with pytest.raises(pg.DTypeError, match=says):
            pg.gemm(da, db, out=out, device="cuda")
        assert (lib.host(out) == SENTINEL).all()


@pytest.mark.cuda
def test_out_dtype_float32_for_half_inputs_with_a_float32_c(lib, cuda80, rng):
    """float16 (and torch bfloat16) inputs with out_dtype float32 (NumPy's spelling and the
    library's): a float32 result of the library's kind, c float32, 2-D and a 3-D batch."""
    m, k, n = 56, 72, 40
    spellings = [np.float32] + ([] if lib.cupy else [lib.xp.float32])
    for dt in (np.float16, BF16):
        if not lib.has(dt):
            continue
        for batch in ((), (2,)):
            a, b = rand(rng, batch + (m, k), dt), rand(rng, batch + (k, n), dt)
            c = rand(rng, batch + (m, n), np.float32)
            for od in spellings:
                got = pg.gemm(lib.to(a), lib.to(b), lib.to(c), alpha=1.5, beta=-0.5, out_dtype=od, device="cuda")
                what = f"{np.dtype(dt).name} out_dtype={od} batch={batch}"
                assert isinstance(got, lib.array_type) and lib.np_dtype(got) == np.float32, what
                check(lib.host(got), a, b, c, 1.5, -0.5, out_dtype=np.float32, what=what)


@pytest.mark.cuda
def test_out_dtype_the_inputs_cannot_give_is_refused_naming_it(lib, cuda80, rng):
    m, k, n = 16, 8, 12
    h16 = (lib.to(rand(rng, (m, k), np.float16)), lib.to(rand(rng, (k, n), np.float16)))
    f32 = (lib.to(rand(rng, (m, k))), lib.to(rand(rng, (k, n))))
    bf = lib.dtype(BF16) if not lib.cupy else "bfloat16"
    with pytest.raises(pg.DTypeError, match=r"got out_dtype bfloat16"):
        pg.gemm(*h16, out_dtype=bf, device="cuda")
    with pytest.raises(pg.DTypeError, match=r"got out_dtype float16"):
        pg.gemm(*f32, out_dtype=lib.dtype(np.float16), device="cuda")
    out32 = lib.full((m, n), SENTINEL, np.float32)
    with pytest.raises(pg.DTypeError, match=r"out is float32 but out_dtype=float16"):
        pg.gemm(*h16, out=out32, out_dtype=lib.dtype(np.float16), device="cuda")
    with pytest.raises(pg.DTypeError, match=r"c must have the dtype of the result \(float32\); got float16"):
        pg.gemm(*h16, lib.to(rand(rng, (m, n), np.float16)), beta=1.0, out_dtype=lib.dtype(np.float32), device="cuda")
    assert (lib.host(out32) == SENTINEL).all()


@pytest.mark.cuda
def test_inputs_of_two_dtypes_are_refused_naming_both(lib, cuda80, rng):
    a16, b32 = lib.to(rand(rng, (8, 4), np.float16)), lib.to(rand(rng, (4, 6)))
    with pytest.raises(pg.DTypeError, match=r"a and b must share one dtype; got a float16 and b float32") as info:
        pg.gemm(a16, b32, device="cuda")
    if not lib.cupy:  # a tensor is cast with .to, and has no astype
        assert "b.to(torch.float16)" in str(info.value) or "astype" not in str(info.value), str(info.value)


@pytest.mark.cuda
@pytest.mark.parametrize("case", ["float32", "bfloat16", "parameter_under_no_grad"])
def test_tensors_that_require_grad_are_refused_with_grad_on_and_read_under_no_grad(cuda80, rng, case):
    """A tensor that requires grad is refused while grad mode is on, naming it (polygemm records no autograd graph: its
    result would lose the gradient), and the detached tensor then computes; under torch.no_grad() a Parameter is read as
    its detach() is, as torch.matmul reads it there."""
    tl = Lib("torch")
    torch = tl.xp
    dt = BF16 if case == "bfloat16" else np.float32
    a, b = rand(rng, (48, 32), dt), rand(rng, (32, 40), dt)
    ta = tl.to(a)
    if case == "parameter_under_no_grad":
        w = torch.nn.Parameter(tl.to(b))
        with torch.no_grad():
            got = pg.gemm(ta, w, device="cuda")
        check(tl.host(got), a, b, what="a Parameter under no_grad")
        assert not got.requires_grad
        return
    w = tl.to(b).requires_grad_(True)
    with pytest.raises(pg.ArgumentError, match=r"^b requires grad.*torch\.no_grad\(\).*b\.detach\(\)"):
        pg.gemm(ta, w, device="cuda")
    got = pg.gemm(ta, w.detach(), device="cuda")
    check(tl.host(got), a, b, what=f"{case} detached")


@pytest.mark.cuda
def test_torch_bfloat16_in_place_into_float32_c_and_k_zero(cuda80, rng):
    """bfloat16 batches accumulated in place into a float32 c (out=c), and K = 0 with a float32 c:
    beta * c in float32."""
    tl = Lib("torch")
    torch = tl.xp
    bt, m, k, n = 2, 40, 64, 56
    a, b, c = rand(rng, (bt, m, k), BF16), rand(rng, (k, n), BF16), rand(rng, (bt, m, n), np.float32)
    tc = tl.to(c)
    assert pg.gemm(tl.to(a), tl.to(b), tc, alpha=0.5, beta=1.0, out=tc, device="cuda") is tc
    check(tl.host(tc), a, b, c, 0.5, 1.0, out_dtype=np.float32, what="bf16 into float32 c in place")
    a0, b0, c2 = np.zeros((m, 0), BF16), np.zeros((0, n), BF16), rand(rng, (m, n), np.float32)
    got = pg.gemm(tl.to(a0), tl.to(b0), tl.to(c2), beta=-2.0, out_dtype=torch.float32, device="cuda")
    assert got.dtype == torch.float32
    check(tl.host(got), a0, b0, c2, 1.0, -2.0, out_dtype=np.float32, what="bf16 K=0 float32 c")


@pytest.mark.cuda
def test_a_broadcast_view_over_the_batch_is_read_without_a_copy(lib, cuda80, rng):
    """An operand broadcast over the batch as a view (cupy.broadcast_to / Tensor.expand: batch
    stride 0) is read as it is: no copy in the plan, matrix i is a @ b[i]."""
    bt, m, k, n = 4, 48, 32, 56
    for dt in (np.float32, np.float16):
        a, b = rand(rng, (m, k), dt), rand(rng, (bt, k, n), dt)
        va = lib.broadcast(lib.to(a)[None], (bt, m, k))
        db = lib.to(b)
        assert pg.explain(va, db, device="cuda").copies == []
        check(lib.host(pg.gemm(va, db, device="cuda")), np.broadcast_to(a, (bt, m, k)), b, what=f"{np.dtype(dt).name} expanded a")


@pytest.mark.cuda
def test_a_c_broadcast_over_the_batch_is_taken_as_on_the_host(lib, cuda, rng):
    """c broadcast over the batch as a view: on the host it is copied once; on the device its own
    library makes it whole, and the result is the same."""
    bt, m, k, n = 3, 32, 24, 40
    a, b, bias = rand(rng, (bt, m, k)), rand(rng, (bt, k, n)), rand(rng, (m, n))
    host_c = np.broadcast_to(bias, (bt, m, n))
    check(pg.gemm(a, b, host_c, beta=1.0, device="cuda"), a, b, host_c, 1.0, 1.0, what="host broadcast c")
    dc = lib.broadcast(lib.to(bias)[None], (bt, m, n))
    got = pg.gemm(lib.to(a), lib.to(b), dc, beta=1.0, device="cuda")
    check(lib.host(got), a, b, host_c, 1.0, 1.0, what="device broadcast c")
    assert any(c.startswith("c (a device array") for c in pg.last_plan().copies)


@pytest.mark.cuda
def test_a_batch_sharing_b_with_a_float32_c_and_out(lib, cuda80, rng):
    """a (4, M, K) float16 with b (K, N) and b (1, K, N) shared by the batch, c and out float32 of
    the result's shape, alpha and beta."""
    bt, m, k, n = 4, 40, 72, 48
    a, c = rand(rng, (bt, m, k), np.float16), rand(rng, (bt, m, n), np.float32)
    for bshape in ((k, n), (1, k, n)):
        b = rand(rng, bshape, np.float16)
        out = lib.full((bt, m, n), np.nan, np.float32)
        assert pg.gemm(lib.to(a), lib.to(b), lib.to(c), alpha=-0.75, beta=0.5, out=out, device="cuda") is out
        check(lib.host(out), a, b, c, -0.75, 0.5, out_dtype=np.float32, what=f"b {bshape}")


@pytest.mark.cuda
def test_four_d_batches_broadcast_as_numpy_matmul(lib, cuda, rng):
    """(2, 3, M, K) @ (3, K, N) and (2, 1, M, K) @ (3, K, N), as numpy.matmul broadcasts them: the
    operand whose batch one stride cannot walk is broadcast and made whole by its own library."""
    m, k, n = 24, 16, 20
    for sa, sb in (((2, 3, m, k), (3, k, n)), ((2, 1, m, k), (3, k, n))):
        a, b = rand(rng, sa), rand(rng, sb)
        check(pg.gemm(a, b, device="cuda"), a, b, what=f"numpy {sa} @ {sb}")
        got = pg.gemm(lib.to(a), lib.to(b), device="cuda")
        assert tuple(got.shape) == (2, 3, m, n)
        check(lib.host(got), a, b, what=f"{lib.name} {sa} @ {sb}")
        check(lib.host(pg.matmul(lib.to(a), lib.to(b))), a, b, what=f"{lib.name} matmul {sa} @ {sb}")


@pytest.mark.cuda
def test_matmul_of_device_stacks_and_vectors(lib, cuda, rng):
    """matmul with a stack and a vector on the device: (B, M, K) @ (K,) is (B, M), (K,) @ (B, K, N)
    is (B, N), in the inputs' kind, and into an out of that shape."""
    bt, m, k, n = 3, 40, 33, 28
    s1, v, s2 = rand(rng, (bt, m, k)), rand(rng, (k,)), rand(rng, (bt, k, n))
    got = pg.matmul(lib.to(s1), lib.to(v))
    assert isinstance(got, lib.array_type) and tuple(got.shape) == (bt, m)
    np.testing.assert_allclose(lib.host(got), np.matmul(s1.astype(np.float64), v), rtol=1e-4, atol=1e-3)
    got = pg.matmul(lib.to(v), lib.to(s2))
    assert isinstance(got, lib.array_type) and tuple(got.shape) == (bt, n)
    np.testing.assert_allclose(lib.host(got), np.matmul(v.astype(np.float64), s2), rtol=1e-4, atol=1e-3)
    out = lib.full((bt, m), np.nan, np.float32)
    assert pg.matmul(lib.to(s1), lib.to(v), out=out) is out
    np.testing.assert_allclose(lib.host(out), np.matmul(s1.astype(np.float64), v), rtol=1e-4, atol=1e-3)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_cupy_calls_on_non_blocking_streams_follow_the_streams_pending_writes(cuda80, rng, dtype):
    """README: work is queued on the stream the operands name (CuPy's current stream). Each call
    follows a spin kernel and the writes of its inputs on a non-blocking stream; only that stream
    is synchronized. A call queued on any other stream reads the NaN the inputs held before.
    New result, out=, c with beta and in place; planned, cached, and planned again on the stream."""
    cp = pytest.importorskip("cupy")
    m, k, n = 256, 192, 320
    a, b, c = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype), rand(rng, (m, n), dtype)
    src_a, db, src_c = cp.asarray(a), cp.asarray(b), cp.asarray(c)
    x, cc, out = cp.empty((m, k), dtype), cp.empty((m, n), dtype), cp.empty((m, n), dtype)
    calls = {
        "new": (lambda: pg.gemm(x, db, device="cuda"), None, 1.0, 0.0),
        "out": (lambda: pg.gemm(x, db, out=out, device="cuda"), None, 1.0, 0.0),
        "c_beta": (lambda: pg.gemm(x, db, cc, alpha=0.5, beta=-1.0, device="cuda"), c, 0.5, -1.0),
        "in_place": (lambda: pg.gemm(x, db, cc, alpha=0.5, beta=-1.0, out=cc, device="cuda"), c, 0.5, -1.0),
    }
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    for name, (call, want_c, alpha, beta) in calls.items():
        for i, s in enumerate((s1, s2, s1)):
            if i == 2:
                pg.clear_plan_cache()  # the planning path, kernels already built
            for arr in (x, cc, out):
                arr.fill(np.nan)
            cp.cuda.Device().synchronize()
            with s:
                cupy_spin(cp)
                x[...] = src_a
                cc[...] = src_c
                got = call()
                host = cp.asnumpy(got, stream=s)
            s.synchronize()
            check(host, a, b, want_c, alpha, beta, what=f"{name} call {i}")


@pytest.mark.cuda
def test_torch_calls_on_a_side_stream_follow_its_pending_writes(cuda80, rng):
    """torch's current stream orders the call: on a side stream held by torch.cuda._sleep, inputs
    written after the sleep are what the call reads (out=, c with beta, K = 0, bfloat16 into a
    float32 out); only the side stream is waited for (.cpu())."""
    tl = Lib("torch")
    torch = tl.xp
    m, k, n = 192, 128, 160
    side = torch.cuda.Stream()
    for dt in (np.float32, BF16):
        a, b, c = rand(rng, (m, k), dt), rand(rng, (k, n), dt), rand(rng, (m, n), dt)
        src_a, tb, src_c = tl.to(a), tl.to(b), tl.to(c)
        x, tc = tl.full((m, k), np.nan, dt), tl.full((m, n), np.nan, dt)
        out = tl.full((m, n), np.nan, np.float32)  # float32 for both: bfloat16 products stored in float32
        a0, b0 = tl.to(np.zeros((m, 0), dt)), tl.to(np.zeros((0, n), dt))
        calls = {
            "out": (lambda: pg.gemm(x, tb, out=out, device="cuda"), (a, b, None, 1.0, 0.0), np.float32),
            "c_beta": (lambda: pg.gemm(x, tb, tc, alpha=2.0, beta=0.5, device="cuda"), (a, b, c, 2.0, 0.5), None),
            "k_zero": (lambda: pg.gemm(a0, b0, tc, beta=-1.5, device="cuda"), (np.zeros((m, 0), dt), np.zeros((0, n), dt), c, 1.0, -1.5), None),
        }
        for name, (call, ref, od) in calls.items():
            for i in range(2):  # planned, then cached
                x.fill_(float("nan"))
                tc.fill_(float("nan"))
                out.fill_(float("nan"))
                torch.cuda.synchronize()
                with torch.cuda.stream(side):
                    torch.cuda._sleep(SPIN_CYCLES)
                    x.copy_(src_a)
                    tc.copy_(src_c)
                    got = call()
                    host = tl.host(got)  # waits for the side stream only
                check(host, *ref, out_dtype=od, what=f"{np.dtype(dt).name} {name} call {i}")


@pytest.mark.cuda
def test_a_dlpack_producers_pending_writes_are_waited_for(cuda80, rng):
    """DLPack-only operands made on a torch side stream (held by a sleep): polygemm asks the producer
    for the legacy default stream (__dlpack__(stream=1)), so the call reads the written values."""
    tl = Lib("torch")
    torch = tl.xp
    m, k, n = 160, 96, 128
    a, b = rand(rng, (m, k), np.float16), rand(rng, (k, n), np.float16)
    src, tb = tl.to(a), tl.to(b)
    x = tl.full((m, k), np.nan, np.float16)
    side = torch.cuda.Stream()
    for i in range(2):
        x.fill_(float("nan"))
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(SPIN_CYCLES)
            x.copy_(src)
            got = pg.gemm(DLPackOnly(x), DLPackOnly(tb), device="cuda")
        with cuda80.runtime.active():
            host = got.get() if hasattr(got, "get") else np.asarray(got)
        check(host, a, b, what=f"DLPack-only call {i}")


@pytest.mark.cuda
def test_cuda_array_interface_only_objects(lib, cuda, rng):
    """Objects that offer only __cuda_array_interface__ (version 2, no stream): a, b (one of them
    column-major), c and out are read and written in place, out is returned; without out the
    result is a pycuda GPUArray (README)."""
    import pycuda.gpuarray as gpuarray

    m, k, n = 70, 50, 30
    a, b, c = rand(rng, (m, k)), rand(rng, (k, n)), rand(rng, (m, n))
    A, B, C = CudaArrayOnly(lib.to(a)), CudaArrayOnly(lib.to_f(b)), CudaArrayOnly(lib.to(c))
    target = lib.full((m, n), np.nan, np.float32)
    out = CudaArrayOnly(target)
    lib.sync()
    assert pg.gemm(A, B, C, alpha=0.5, beta=2.0, out=out, device="cuda") is out
    lib.sync()
    check(lib.host(target), a, b, c, 0.5, 2.0, what="interface-only out")
    got = pg.gemm(A, B, device="cuda")
    assert isinstance(got, gpuarray.GPUArray), type(got)
    with cuda.runtime.active():
        host = got.get()
    check(host, a, b, what="interface-only new result")


@pytest.mark.cuda
def test_cuda_array_interface_only_refusals_name_the_operand(lib, cuda, rng):
    """A read-only out, a pointer off its element size, strides that are not whole elements:
    ArgumentError naming the operand; nothing is written."""
    m, k, n = 16, 8, 12
    da, db = lib.to(rand(rng, (m, k))), lib.to(rand(rng, (k, n)))
    target = lib.full((m, n), SENTINEL, np.float32)
    with pytest.raises(pg.ArgumentError, match=r"out is a read-only cuda array"):
        pg.gemm(da, db, out=CudaArrayOnly(target, readonly=True), device="cuda")
    with pytest.raises(pg.ArgumentError, match=r"a is a cuda array whose data pointer .* not a multiple of its element size"):
        pg.gemm(CudaArrayOnly(da, shift=2), db, device="cuda")
    with pytest.raises(pg.ArgumentError, match=r"b is a cuda array with strides"):
        pg.gemm(da, CudaArrayOnly(db, strides=(4 * n, 2)), device="cuda")
    assert (lib.host(target) == SENTINEL).all()


@pytest.mark.cuda
def test_matmul_takes_cuda_array_interface_only_matrices_as_gemm_does(lib, cuda, rng):
    # expectation: gemm takes objects that offer only __cuda_array_interface__ (README: "NumPy,
    # __cuda_array_interface__ arrays ..."), so matmul, "numpy.matmul semantics" over the same
    # operands, should too. The source (pg.core.vectors.ndim_of) asks NumPy for the number of dimensions of an
    # object without ndim, gets 0 and refuses it: "a is a scalar (0-D CudaArrayOnly)". DLPack-only
    # objects are held to the same rule (test_matmul_takes_dlpack_only_arrays_as_gemm_does).
    import pycuda.gpuarray as gpuarray

    m, k, n = 20, 12, 16
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    A, B = CudaArrayOnly(lib.to(a)), CudaArrayOnly(lib.to(b))
    lib.sync()
    got = pg.matmul(A, B)
    assert isinstance(got, gpuarray.GPUArray), type(got)
    with cuda.runtime.active():
        host = got.get()
    check(host, a, b, what="matmul of interface-only matrices")


@pytest.mark.cuda
def test_dlpack_only_device_out_is_refused_and_dlpack_inputs_compute(lib, cuda, rng):
    """A DLPack-only object of device memory cannot be written through DLPack: as out it is refused
    naming out (and not written); as inputs it computes (float32, the inputs' library unknown:
    a pycuda GPUArray or an object with get())."""
    m, k, n = 36, 20, 28
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    da, db = lib.to(a), lib.to(b)
    target = lib.full((m, n), SENTINEL, np.float32)
    with pytest.raises(pg.ArgumentError, match=r"out must be an array polygemm can write"):
        pg.gemm(da, db, out=DLPackOnly(target), device="cuda")
    assert (lib.host(target) == SENTINEL).all()
    lib.sync()
    got = pg.gemm(DLPackOnly(da), DLPackOnly(db), device="cuda")
    with cuda.runtime.active():
        host = got.get() if hasattr(got, "get") else np.asarray(got)
    check(host, a, b, what="DLPack-only float32 inputs")


@pytest.mark.cuda
def test_an_injected_launch_failure_leaves_out_and_c_unchanged(lib, cuda80, rng, monkeypatch):
    """Preparing the launch fails (as a kernel build would): DeviceError, and out and c hold what they
    held: a batch with c moved into out first, in place, and a new result."""
    from polygemm.backends.cuda.launch import PreparedLaunch

    bt, m, k, n = 3, 64, 48, 80
    a, b = rand(rng, (bt, m, k), np.float16), rand(rng, (bt, k, n), np.float16)
    c = rand(rng, (bt, m, n), np.float32)
    da, db, dc = lib.to(a), lib.to(b), lib.to(c)
    out = lib.full((bt, m, n), SENTINEL, np.float32)

    def fail(self, *args, **kwargs):
        raise pg.DeviceError("injected: building the kernel failed")

    monkeypatch.setattr(PreparedLaunch, "prepare", fail)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(da, db, dc, alpha=0.5, beta=1.0, out=out, device="cuda")
    lib.sync()
    assert (lib.host(out) == SENTINEL).all(), "out was written before the failure"
    assert same_bits(lib.host(dc), c)
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(da, db, dc, alpha=0.5, beta=1.0, out=dc, device="cuda")
    lib.sync()
    assert same_bits(lib.host(dc), c), "c (out=c) was written before the failure"
    with pytest.raises(pg.DeviceError, match="injected"):
        pg.gemm(da, db, device="cuda")


@pytest.mark.cuda
def test_refused_calls_leave_out_and_c_unchanged(lib, cuda, rng):
    """After a good call (its plan cached), calls refused for bad scalars, shapes, dtypes or variant
    leave out and c as they were, bit for bit."""
    m, k, n = 48, 32, 40
    a, b, c = rand(rng, (m, k)), rand(rng, (k, n)), rand(rng, (m, n))
    da, db, dc = lib.to(a), lib.to(b), lib.to(c)
    out = lib.full((m, n), np.nan, np.float32)
    pg.gemm(da, db, dc, alpha=0.5, beta=1.0, out=out, device="cuda")
    check(lib.host(out), a, b, c, 0.5, 1.0, what="the good call")
    out_before = lib.host(out)
    bad = [
        (pg.ArgumentError, dict(alpha=float("nan"), beta=1.0)),
        (pg.ArgumentError, dict(alpha=0.5, beta=float("inf"))),
        (pg.UnsupportedProblemError, dict(alpha=1e39, beta=1.0)),
        (pg.UnsupportedProblemError, dict(alpha=0.5, beta=1.0, variant="no_such_rung")),
    ]
    for exc, kw in bad:
        with pytest.raises(exc):
            pg.gemm(da, db, dc, out=out, device="cuda", **kw)
    with pytest.raises(pg.ShapeError):
        pg.gemm(da, db, lib.to(rand(rng, (m, n + 1))), beta=1.0, out=out, device="cuda")
    with pytest.raises(pg.DTypeError):
        pg.gemm(da, lib.to(rand(rng, (k, n), np.float16)), dc, beta=1.0, out=out, device="cuda")
    lib.sync()
    assert same_bits(lib.host(out), out_before) and same_bits(lib.host(dc), c)


@pytest.mark.cuda
def test_a_device_scalar_as_alpha_is_taken_or_refused_naming_alpha(lib, cuda, rng):
    """alpha as the library's 0-D device array (README: alpha "Python or NumPy scalars or 0-D
    arrays"): computed with its value, or refused as an ArgumentError that names alpha; never a
    wrong result or another error."""
    m, k, n = 24, 16, 20
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    alpha = lib.xp.asarray(np.float32(0.5)) if lib.cupy else lib.xp.tensor(0.5, device="cuda")
    try:
        got = pg.gemm(lib.to(a), lib.to(b), alpha=alpha, device="cuda")
    except pg.ArgumentError as exc:
        assert str(exc).startswith("alpha"), str(exc)
    else:
        check(lib.host(got), a, b, None, 0.5, what="device 0-D alpha")
