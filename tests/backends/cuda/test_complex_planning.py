"""Complex products on the cuda backend without a GPU: the plan (four real products of one real plan, on which rung
and why), the refusals, and the 4M run itself on an emulated device (host memory standing in for the GPU's, the
strided copy and the real product computed by NumPy at the pointers the run passes)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from polygemm.backends.cuda.backend import CudaBackend
from polygemm.backends.cuda.complex_launch import PLANE_ALIGN, ComplexLaunch, plane_ld
from polygemm.backends.cuda.planning import Mat, strides
from polygemm.errors import DeviceError, DTypeError
from polygemm.problem import normalize

BASE = 1 << 24  # the emulated device's first address (256-byte aligned, never 0)


@pytest.fixture
def be():
    b = CudaBackend()
    b._rt = None  # plan as for a device of 132 SMs, whatever this machine has
    return b


class Mem:
    """Emulated device memory: a byte buffer addressed from BASE, a bump allocator, the strided copy."""

    def __init__(self, nbytes: int = 1 << 22) -> None:
        self.buf = np.zeros(nbytes, np.uint8)
        self.top = 0
        self.scratch_taken: list[int] = []
        self.released: list[int] = []
        self.copies = 0

    def alloc(self, nbytes: int) -> int:
        ptr = BASE + self.top
        self.top += -(-max(nbytes, 1) // PLANE_ALIGN) * PLANE_ALIGN
        assert self.top <= self.buf.size
        return ptr

    def view(self, ptr: int, dtype, shape, elem_strides) -> np.ndarray:
        dt = np.dtype(dtype)
        off = ptr - BASE
        assert off >= 0 and off % dt.itemsize == 0
        return np.lib.stride_tricks.as_strided(self.buf[off:].view(dt), shape, tuple(s * dt.itemsize for s in elem_strides))

    def place(self, host: np.ndarray) -> tuple["Dev", np.ndarray]:
        """``host`` copied into device memory, same strides (a view of a bigger block keeps its strides)."""
        base = host.base if host.base is not None and isinstance(host.base, np.ndarray) else host
        span = np.ascontiguousarray(base) if base is not host else host
        ptr = self.alloc(span.nbytes)
        dev_base = np.ndarray(span.shape, span.dtype, self.buf, ptr - BASE, span.strides if base is host else None)
        dev_base[...] = span
        if base is host:
            arr = dev_base
        else:  # the same view of the device copy of its base
            offset = host.__array_interface__["data"][0] - base.__array_interface__["data"][0]
            arr = np.ndarray(host.shape, host.dtype, self.buf, ptr - BASE + offset, host.strides)
        return Dev(arr, ptr + (arr.__array_interface__["data"][0] - dev_base.__array_interface__["data"][0])), arr

    # -- what ComplexLaunch calls on its runtime --------------------------------------------
    def scratch(self, nbytes: int, stream: int) -> int:
        ptr = self.alloc(nbytes)
        self.view(ptr, np.uint8, (nbytes,), (1,))[...] = 0xFF  # NaN-filled: a plane read before written shows
        self.scratch_taken.append(ptr)
        return ptr

    def release(self, ptr: int, stream: int) -> None:
        self.released.append(ptr)

    def copy_scale(self, rows: int, cols: int, scale: float, src: Mat | None, dst: Mat, stream: int = 0, dtype: str = "") -> None:
        self.copies += 1
        dt = np.float32 if dst.itemsize == 4 else np.float64
        d = self.view(dst.ptr, dt, (rows, cols), strides(dst))
        if src is None or scale == 0:
            d[...] = 0
        else:
            d[...] = scale * self.view(src.ptr, dt, (rows, cols), strides(src))


class Dev:
    """A device array at an emulated address (the CUDA array interface only)."""

    def __init__(self, arr: np.ndarray, ptr: int) -> None:
        self.arr = arr
        self.shape = arr.shape
        self.dtype = arr.dtype
        self.__cuda_array_interface__ = {"shape": arr.shape, "strides": arr.strides, "typestr": arr.dtype.str,
                                         "data": (ptr, False), "version": 3}


class Real:
    """The real plan's launch, emulated: ``C = alpha·A·B + beta·C`` on compact row-major planes at the pointers given
    (the whole batch per launch when the complex launch says the rung is batched)."""

    def __init__(self, mem: Mem, cl: ComplexLaunch, fail_at: int = -1) -> None:
        self.mem, self.cl, self.fail_at = mem, cl, fail_at
        self.launches: list[tuple[float, float]] = []
        self.built = False
        self.spec = object()  # a rung to build (None: the cuBLAS comparator)

    def kernel(self) -> None:
        self.built = True

    def prepare(self, a: int, b: int, c: int, alpha: float, beta: float, stream: int = 0) -> tuple:
        if len(self.launches) == self.fail_at:
            raise DeviceError("emulated launch failure")
        return a, b, c, alpha, beta

    def launch(self, prepared: tuple, stream: int = 0) -> None:
        a, b, c, alpha, beta = prepared
        cl, mem = self.cl, self.mem
        lda, ldb, ldc = cl.lds
        pa, pb, pc = cl.plane_strides
        dt = np.float32 if cl.itemsize == 4 else np.float64
        for i in range(cl.count if cl.batched else 1):
            A = mem.view(a + i * pa, dt, (cl.m, cl.k), (lda, 1))
            B = mem.view(b + i * pb, dt, (cl.k, cl.n), (ldb, 1))
            C = mem.view(c + i * pc, dt, (cl.m, cl.n), (ldc, 1))
            prod = alpha * (A.astype(np.float64) @ B.astype(np.float64))
            C[...] = prod + beta * C if beta != 0 else prod
        self.launches.append((alpha, beta))


def draw(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def emulate(be, mem, a, b, c=None, out=None, alpha=1.0, beta=0.0, batched=True, conj=(False, False, False), fail_at=-1):
    """Plan the call on device copies of ``a``, ``b``, ``c`` (``out``: "c" in place, or an array), run it emulated;
    (the destination's values, the plan, the emulated real launch)."""
    da, _ = mem.place(a)
    db, _ = mem.place(b)
    dc = mem.place(c)[0] if c is not None else None
    dout = dc if isinstance(out, str) else (mem.place(out)[0] if out is not None else None)
    if dout is None:
        shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        dout = mem.place(np.zeros(shape, a.dtype))[0]
    plan = be.plan(normalize(da, db, dc, alpha=alpha, beta=beta, out=dout).broadcasts_for(be))
    cl = plan.private.launch
    assert isinstance(cl, ComplexLaunch)
    real = Real(mem, cl, fail_at)
    cl = replace(cl, real=real, rt=mem, batched=batched or cl.count == 1)
    real.cl = cl
    ptr = lambda d: d.__cuda_array_interface__["data"][0]  # noqa: E731
    cl.run(ptr(da), ptr(db), ptr(dc) if dc is not None and beta != 0 else 0, ptr(dout), alpha, beta, 0, conj)
    return dout.arr, plan, real


def within(got, want, k, dtype):
    u = np.finfo(np.float32 if dtype == "complex64" else np.float64).eps
    scale = np.abs(want) + 1
    assert np.all(np.abs(got - want) <= 8 * (k + 2) * u * scale), float(np.abs(got - want).max())


# -- plans ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, real", [("complex64", "float32"), ("complex128", "float64")])
def test_the_plan_is_four_real_products_of_the_real_rung_auto_picks(be, dtype, real):
    dev = lambda shape: Dev(np.zeros(shape, dtype), BASE)  # noqa: E731  (planned only: nothing is read)
    plan = be.plan(normalize(dev((4096, 4096)), dev((4096, 4096))))
    twin = be.plan(normalize(np.zeros((4096, 4096), real), np.zeros((4096, 4096), real)))
    assert plan.variant == twin.variant
    assert real in be.get_variant(plan.variant).dtypes and dtype in be.get_variant(plan.variant).dtypes
    assert "four real products (4M" in plan.reason and f"{real} rung" in plan.reason
    assert plan.launch["complex"].startswith(f"4M: 4 {real} products")
    assert any("Ar, Ai" in c and "scratch" in c for c in plan.copies)
    text = str(plan)
    assert "4M" in text and plan.variant in text


def test_complex64_takes_the_precisions_of_float32(be):
    assert be.precisions("complex64") == be.precisions("float32")
    for precision in be.precisions("float32"):
        z = Dev(np.zeros((2048, 2048), np.complex64), BASE)
        plan = be.plan(replace(normalize(z, z), precision=precision))
        twin = be.plan(replace(normalize(np.zeros((2048, 2048), np.float32), np.zeros((2048, 2048), np.float32)), precision=precision))
        assert plan.variant == twin.variant, precision
        assert any(f"precision={precision!r}" in n for n in plan.notes)


def test_a_named_rung_of_another_dtype_is_refused(be):
    z = Dev(np.zeros((64, 64), np.complex64), BASE)
    f16 = next(v.name for v in be.variants() if v.dtypes[0] == "float16" and not v.vendor)
    f64 = next(v.name for v in be.variants() if "float64" in v.dtypes and "float32" not in v.dtypes and not v.vendor)
    for name in (f16, f64):
        with pytest.raises(DTypeError, match=r"complex64"):
            be.plan(normalize(z, z), name)
    f32 = next(v.name for v in be.variants() if "float32" in v.dtypes and v.auto and not v.vendor)
    assert be.plan(normalize(z, z), f32).variant.startswith(f32)


def test_a_batch_is_one_planar_copy_a_broadcast_operand_one_plane(be):
    a = Dev(np.zeros((6, 33, 17), np.complex64), BASE)
    b = Dev(np.zeros((17, 5), np.complex64), BASE)
    plan = be.plan(normalize(a, b))
    cl = plan.private.launch
    assert cl.strides[1] == 0 and cl.plane_strides[1] == 0  # b: one plane pair for the batch
    assert cl.lds == (plane_ld(17, 4), plane_ld(5, 4), plane_ld(5, 4)) == (20, 8, 8)
    assert all(off % PLANE_ALIGN == 0 for off in cl.offsets)
    assert "whole batch" in plan.launch["batch"]


def test_host_complex_arrays_are_planned_with_their_copies(be):
    z = np.zeros((30, 20), np.complex128)
    plan = be.plan(normalize(z, z.T))
    assert plan.copies[0].startswith("host -> device")
    assert "4M" in plan.reason


def test_an_empty_product_plans_no_kernel(be):
    z = Dev(np.zeros((5, 0), np.complex64), BASE)
    w = Dev(np.zeros((0, 3), np.complex64), BASE)
    plan = be.plan(normalize(z, w))
    assert "no GEMM kernel" in plan.reason and plan.private.launch.real is None


# -- the run, emulated ------------------------------------------------------------------------------

SHAPES = [((1, 1), (1, 1)), ((7, 13), (13, 5)), ((1, 9), (9, 11)), ((9, 3), (3, 1)), ((6, 1), (1, 4)), ((5, 300), (300, 3))]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("sa, sb", SHAPES, ids=str)
@pytest.mark.parametrize("order", ["CC", "FC", "CF", "TT"])
def test_4m_matches_numpy_on_every_layout(be, rng, dtype, sa, sb, order):
    mem = Mem()
    a, b = draw(rng, sa, dtype), draw(rng, sb, dtype)
    if order == "TT":  # transposed views of C-ordered arrays
        a, b = np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T
    else:
        a = np.asfortranarray(a) if order[0] == "F" else a
        b = np.asfortranarray(b) if order[1] == "F" else b
    got, plan, real = emulate(be, mem, a, b)
    within(got, a.astype(np.complex128) @ b.astype(np.complex128), sa[1], dtype)
    assert real.built and [s for _, s in real.launches] == [0.0, 1.0, 0.0, 1.0]
    assert [al for al, _ in real.launches] == [1.0, -1.0, 1.0, 1.0]
    assert mem.released == mem.scratch_taken and len(mem.released) == 1


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_c_beta_alpha_and_in_place(be, rng, dtype):
    mem = Mem()
    a, b, c = draw(rng, (8, 12), dtype), draw(rng, (12, 7), dtype), draw(rng, (8, 7), dtype)
    want = -1.5 * (a.astype(np.complex128) @ b) + 0.25 * c
    got, _, real = emulate(be, mem, a, b, c, alpha=-1.5, beta=0.25)
    within(got, want, 12, dtype)
    assert [s for _, s in real.launches] == [0.25, 1.0, 0.25, 1.0]
    got, _, _ = emulate(be, mem, a, b, np.asfortranarray(c), out="c", alpha=-1.5, beta=0.25)  # out is c, column-major
    within(got, want, 12, dtype)
    assert got.flags.f_contiguous


def test_batches_stacked_strided_and_broadcast(be, rng):
    for batched in (True, False):
        mem = Mem()
        a, b = draw(rng, (3, 5, 9), "complex64"), draw(rng, (9, 4), "complex64")
        got, plan, real = emulate(be, mem, a, b, batched=batched)
        within(got, a.astype(np.complex128) @ b, 9, "complex64")
        assert len(real.launches) == (4 if batched else 12)
        a2 = draw(rng, (3, 4, 6), "complex64").transpose(0, 2, 1)  # a batch of column-major views
        b2 = draw(rng, (1, 4, 5), "complex64")
        got, _, real = emulate(be, Mem(), a2, b2, batched=batched)
        within(got, a2.astype(np.complex128) @ b2, 4, "complex64")
        assert len(real.launches) == (4 if batched else 12)


def test_a_conjugated_operand_reads_its_imaginary_plane_negated(be, rng):
    a, b, c = draw(rng, (4, 6), "complex64"), draw(rng, (6, 3), "complex64"), draw(rng, (4, 3), "complex64")
    got, _, _ = emulate(be, Mem(), a, b, c, beta=2.0, conj=(True, True, True))
    within(got, a.conj().astype(np.complex128) @ b.conj() + 2.0 * c.conj(), 6, "complex64")


def test_k_zero_writes_beta_c_or_zeros(be, rng):
    c = draw(rng, (4, 3), "complex128")
    got, _, real = emulate(be, Mem(), np.zeros((4, 0), np.complex128), np.zeros((0, 3), np.complex128), c, beta=-2.0)
    assert np.array_equal(got, -2.0 * c) and not real.launches
    got, _, _ = emulate(be, Mem(), np.zeros((4, 0), np.complex128), np.zeros((0, 3), np.complex128))
    assert np.array_equal(got, np.zeros((4, 3)))


@pytest.mark.parametrize("fail_at", [0, 2, 3])
def test_a_failed_launch_leaves_out_and_c_untouched_and_gives_scratch_back(be, rng, fail_at):
    mem = Mem()
    a, b, c = draw(rng, (5, 7), "complex64"), draw(rng, (7, 4), "complex64"), draw(rng, (5, 4), "complex64")
    with pytest.raises(DeviceError, match="emulated"):
        emulate(be, mem, a, b, c, out="c", beta=1.0, fail_at=fail_at)
    assert mem.released == mem.scratch_taken and len(mem.released) == 1
    # c (and out, which is c) hold their values: c was placed third, after a and b
    placed = np.ndarray(c.shape, c.dtype, mem.buf, -(-a.nbytes // PLANE_ALIGN) * PLANE_ALIGN + -(-b.nbytes // PLANE_ALIGN) * PLANE_ALIGN)
    assert np.array_equal(placed, c)


# -- torch's conjugate views ------------------------------------------------------------------------

def _complex_tensors(monkeypatch):
    from tests.helpers import fake_torch

    Tensor = fake_torch(monkeypatch)

    class CTensor(Tensor):
        """A CUDA complex64 tensor of the stand-in torch, with the conjugate bit."""

        def __init__(self, ptr, shape, stride, conj=False):
            super().__init__(ptr, shape, stride)
            self.dtype, self._conj = "complex64", conj

        def element_size(self):
            return 8

        def is_conj(self):
            return self._conj

        def is_neg(self):
            return False

        def is_complex(self):
            return True

        def conj(self):  # torch: the conjugate of a conjugate view is the memory's values, no copy
            return CTensor(self.ptr, self.shape, self._stride, not self._conj)

        def resolve_conj(self):
            raise AssertionError("a CUDA conjugate view is read without a conjugated copy")

        @property
        def __cuda_array_interface__(self):
            return {"typestr": "<c8", "shape": self.shape, "strides": None, "data": (self.ptr, False), "version": 2}

    return CTensor


def test_a_torch_conjugate_view_is_read_conjugated_without_a_copy(be, monkeypatch):
    from polygemm.errors import ArgumentError, UnsupportedProblemError

    T = _complex_tensors(monkeypatch)
    a, b, c = T(BASE, (64, 32), (32, 1), conj=True), T(BASE + (1 << 16), (32, 16), (16, 1)), T(BASE + (2 << 16), (64, 16), (16, 1), True)
    p = normalize(a, b, c, beta=1.0)
    assert p.a.conj and not p.b.conj and p.c.conj and p.a.ptr == BASE
    plan = be.plan(p)
    assert plan.private.launch.conj == (True, False, True)
    assert any("a, c: torch's lazy conjugate" in n and "negated" in n for n in plan.notes)

    class NoConjugates(CudaBackend):
        reads_conjugates = False

    refused = NoConjugates().refusal(p)
    assert isinstance(refused, UnsupportedProblemError)
    assert "conjugate bit" in str(refused) and "a.resolve_conj()" in str(refused)
    with pytest.raises(ArgumentError, match="conjugate bit"):
        normalize(a.conj(), b, out=T(BASE + (3 << 16), (64, 16), (16, 1), True))


def test_one_c_for_the_whole_batch_is_read_into_every_result(be, rng):
    """A ComplexLaunch whose c has batch stride 0 (one matrix for all) gives each matrix of the result its C0."""
    mem = Mem()
    a, b = draw(rng, (3, 5, 4), "complex64"), draw(rng, (3, 4, 6), "complex64")
    c = draw(rng, (5, 6), "complex64")
    da, db = mem.place(a)[0], mem.place(b)[0]
    dc3 = mem.place(np.broadcast_to(c, (3, 5, 6)).copy())[0]
    dc1 = mem.place(c)[0]
    dout = mem.place(np.zeros((3, 5, 6), np.complex64))[0]
    plan = be.plan(normalize(da, db, dc3, beta=1.5, out=dout))
    cl = plan.private.launch
    cl = replace(cl, strides=cl.strides[:2] + (0,) + cl.strides[3:], rt=mem)
    real = Real(mem, cl)
    cl = replace(cl, real=real)
    real.cl = cl
    ptr = lambda d: d.__cuda_array_interface__["data"][0]  # noqa: E731
    cl.run(ptr(da), ptr(db), ptr(dc1), ptr(dout), 1.0, 1.5)
    within(dout.arr, a.astype(np.complex128) @ b + 1.5 * c, 4, "complex64")


class HostBuffer:
    """An allocation of the emulated device (what ``CudaRuntime.allocate`` hands the host path)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def __int__(self) -> int:
        return self.ptr

    def free(self) -> None:
        pass


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_host_arrays_upload_run_and_come_back_into_out(be, rng, dtype):
    import types

    from polygemm.backends.cuda.complex_plan import run_complex_host
    from polygemm.problem import Call

    mem = Mem(1 << 23)

    def htod(buf, host):
        raw = np.frombuffer(memoryview(host).cast("B"), np.uint8)
        mem.buf[int(buf) - BASE:int(buf) - BASE + raw.size] = raw

    def dtoh(host, ptr):
        view = memoryview(host).cast("B")
        view[:] = mem.buf[int(ptr) - BASE:int(ptr) - BASE + view.nbytes].tobytes()

    rt = types.SimpleNamespace(allocate=lambda n: HostBuffer(mem.alloc(n)), drv=types.SimpleNamespace(memcpy_htod=htod, memcpy_dtoh=dtoh),
                               scratch=mem.scratch, release=mem.release, copy_scale=mem.copy_scale)
    a, b, c = draw(rng, (3, 65, 33), dtype), draw(rng, (33, 17), dtype), draw(rng, (3, 65, 17), dtype)
    out = np.zeros((3, 17, 65), dtype).swapaxes(-1, -2)  # column-major matrices
    for args, kw in [((a, b), {}), ((a, b, c), {"alpha": 0.5, "beta": 2.0, "out": out}), ((a[0], b), {})]:
        plan = be.plan(normalize(*args, **kw).broadcasts_for(be))
        real = Real(mem, plan.private.launch)
        launch = replace(plan.private.launch, real=real, rt=rt)
        real.cl = launch
        got = run_complex_host(rt, plan.problem, replace(plan.private, launch=launch), Call.from_problem(plan.problem))
        want = kw.get("alpha", 1.0) * (args[0].astype(np.complex128) @ args[1]) + (2.0 * c if len(args) > 2 else 0)
        assert got.shape == want.shape and (got is out) == ("out" in kw)
        within(got, want, 33, dtype)
