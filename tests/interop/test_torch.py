"""torch tensors on the CPU (and a stand-in torch for CUDA tensors' views)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polygemm
import polygemm as pg
from polygemm.errors import DTypeError, ShapeError
from polygemm.testing import assert_close
from tests.helpers import DLPackOnly, OnPluginDevice


def _torch():
    return pytest.importorskip("torch")


def _negated(torch, shape, where="cpu"):
    """A real tensor with torch's negative bit set, as ``z.conj().imag`` makes one: its memory holds the negatives."""
    t = torch.randn(*shape, dtype=torch.complex64, device=where).conj().imag
    assert t.is_neg()
    return t


def _where(torch, where):
    if where == "cuda" and not (torch.cuda.is_available() and polygemm.get_backend("cuda").probe().ok):
        pytest.skip("needs torch with CUDA and polygemm's cuda backend")


class _UnreadableInterface:
    """A device array whose interface refuses to be read (as torch's does for a tensor that requires grad)."""

    @property
    def __cuda_array_interface__(self) -> dict:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. Use var.detach()")


ml_dtypes = pytest.importorskip("ml_dtypes")


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _as_matrices(x: np.ndarray, a_vec: bool, b_vec: bool) -> np.ndarray:
    """A matmul result with its vectors' unit dimensions back (the bound takes matrices)."""
    if b_vec:
        x = x[..., None]
    if a_vec:
        x = x[..., None, :]
    return x


def _cases(rng):
    f = np.asfortranarray
    yield "broadcast (2,1,M,K)@(3,K,N)", _f32(rng, 2, 1, 3, 4), _f32(rng, 3, 4, 5)
    yield "vector @ 4-D stack", _f32(rng, 4), _f32(rng, 2, 1, 4, 5)
    yield "4-D stack @ vector", _f32(rng, 2, 3, 5, 4), _f32(rng, 4)
    yield "reversed rows and columns", _f32(rng, 5, 6)[::-1, ::-1], _f32(rng, 6, 3)[::-1]
    yield "reversed batch", _f32(rng, 3, 2, 4)[::-1], _f32(rng, 4, 5)
    yield "every other column", _f32(rng, 3, 8)[:, ::2], _f32(rng, 4, 2)
    yield "Fortran order", f(_f32(rng, 3, 4)), f(_f32(rng, 4, 5))
    yield "transposed stack", _f32(rng, 2, 4, 3).transpose(0, 2, 1), _f32(rng, 2, 4, 5)
    yield "reversed vectors", _f32(rng, 6)[::-2], _f32(rng, 6, 3)[::2]
    yield "big-endian", _f32(rng, 3, 4).astype(">f4"), _f32(rng, 4, 2).astype(">f4")
    yield "M = 0", _f32(rng, 0, 4), _f32(rng, 4, 5)
    yield "N = 0 in a batch", _f32(rng, 2, 3, 4), _f32(rng, 4, 0)
    yield "batch of 0", _f32(rng, 0, 3, 4), _f32(rng, 4, 5)
    yield "K = 0", _f32(rng, 3, 0), _f32(rng, 0, 5)
    yield "float64 lists", _f32(rng, 2, 3).astype(np.float64).tolist(), _f32(rng, 3).astype(np.float64).tolist()
    yield "float16", _f32(rng, 3, 7).astype(np.float16), _f32(rng, 7, 2).astype(np.float16)
    yield "bfloat16", _f32(rng, 3, 7).astype(ml_dtypes.bfloat16), _f32(rng, 7).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("c", [np.arange(4, dtype=np.float32), np.float32(1.0), np.array(1.0, np.float32)])
def test_a_bias_vector_or_scalar_c_is_told_to_broadcast_not_to_reshape(c):
    # a 1-D c (a bias, as torch.addmm(bias, x, w) takes it, and a @ b + bias broadcasts it) or a scalar c is told to
    # pass it broadcast, e.g. np.broadcast_to(c, (2, 4)), as a 2-D c that broadcasts is (problem.check_c_shape), not
    # to reshape it: c.reshape(2, 4) of four elements raises
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(ShapeError) as info:
        pg.gemm(a, b, c, beta=1.0, device="cpu")
    assert "np.broadcast_to(c, (2, 4))" in str(info.value) and "c.reshape(rows, cols)" not in str(info.value)
    got = pg.gemm(a, b, np.broadcast_to(c, (2, 4)), beta=1.0, device="cpu")  # the way it names
    assert np.array_equal(got, a @ b + c)


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_a_torch_lazy_negation_is_read_as_its_values_in_a_b_c_and_alpha(where):
    """DLPack and the array interfaces export a tensor's memory without its negative bit: polygemm reads z.conj().imag
    with its signs, as torch.matmul does, not flipped silently."""
    torch = _torch()
    _where(torch, where)
    a, b, c = _negated(torch, (5, 7), where), torch.randn(7, 3, device=where), _negated(torch, (5, 3), where)
    ref = a.resolve_neg() @ b
    tol = dict(rtol=1e-5, atol=1e-5) if where == "cpu" else dict(rtol=2e-3, atol=2e-3)  # tf32-free kernels, fp32 sums
    for _ in range(2):  # the second call from the plan cache
        torch.testing.assert_close(polygemm.gemm(a, b), ref, **tol)
    torch.testing.assert_close(polygemm.gemm(b.T, a.T), ref.T, **tol)
    torch.testing.assert_close(polygemm.gemm(a, b, c, beta=1.0), ref + c.resolve_neg(), **tol)
    torch.testing.assert_close(polygemm.matmul(a, b), ref, **tol)
    if where == "cuda":
        return
    alpha = torch.tensor(2 + 3j).conj().imag  # -3.0, stored as 3.0
    torch.testing.assert_close(polygemm.gemm(a, b, alpha=alpha), -3.0 * ref, rtol=1e-5, atol=1e-5)


def test_a_torch_out_with_the_negative_bit_is_refused_and_left_untouched():
    torch = _torch()
    out = torch.zeros(5, 3, dtype=torch.complex64).conj().imag
    before = out.clone()
    with pytest.raises(ValueError, match=r"out is a torch tensor with its negative bit set.*resolve_neg"):
        polygemm.gemm(torch.randn(5, 7), torch.randn(7, 3), out=out)
    assert torch.equal(out, before)


@pytest.mark.parametrize("how", ["gemm_out", "gemm_in_place_c", "matmul_out", "matmul_vector_out"])
def test_writing_a_torch_out_bumps_its_version_so_autograd_sees_it(how):
    """A tensor saved for backward and then overwritten through out= must make backward() raise, as after
    torch.matmul(a, b, out=o): polygemm's write bumps o._version, so backward() never uses the new values."""
    torch = _torch()
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    o = torch.ones(3) if how == "matmul_vector_out" else torch.ones(3, 5)
    w = torch.randn(*o.shape, requires_grad=True)
    loss = (w * o).sum()  # o saved for backward
    v0 = o._version
    if how == "gemm_out":
        polygemm.gemm(a, b, out=o)
    elif how == "gemm_in_place_c":
        polygemm.gemm(a, b, o, beta=1.0, out=o)
    elif how == "matmul_out":
        polygemm.matmul(a, b, out=o)
    else:
        polygemm.matmul(a, torch.randn(4), out=o)
    assert o._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("where", ["cpu", "cuda"])
def test_an_inference_tensor_out_is_written_only_in_inference_mode(where):
    torch = _torch()
    _where(torch, where)
    a, b = torch.randn(3, 4, device=where), torch.randn(4, 5, device=where)
    with torch.inference_mode():
        out = torch.zeros(3, 5, device=where)
    with pytest.raises(ValueError, match=r"out is an inference tensor.*torch\.inference_mode"):
        polygemm.gemm(a, b, out=out)
    assert not out.any()
    ordinary = torch.zeros(3, 5, device=where)
    polygemm.gemm(a, b, out=ordinary)  # a plan for the same shapes in the cache: it must not let the next call through
    with pytest.raises(ValueError, match=r"out is an inference tensor"):
        polygemm.gemm(a, b, out=out)
    assert not out.any()
    with torch.inference_mode():
        assert polygemm.gemm(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)


def test_the_checks_take_torch_bfloat16_as_gemm_does():
    torch = _torch()
    from polygemm.testing import check_result, error_bound

    a, b = torch.randn(3, 4).bfloat16(), torch.randn(4, 5).bfloat16()
    r = polygemm.gemm(a, b)
    assert r.dtype == torch.bfloat16
    res = check_result(r, a, b)
    assert res.ok, res.message
    assert error_bound(a, b).shape == (3, 5)
    assert not check_result(r + 1, a, b).ok  # a wrong result still fails


def test_a_0d_torch_alpha_that_requires_grad_is_refused_with_grad_on_and_read_under_no_grad():
    # a learnable scale's gradient would be lost with the result's grad_fn: refused as an operand that requires grad is
    torch = _torch()
    a, b, c = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 5)
    scale = torch.tensor(2.0, requires_grad=True)
    pg.gemm(a, b, alpha=2.0)  # (a plan cached for the scale's value: the refusal holds on a hit too)
    for kw in ({"alpha": scale}, {"beta": scale}):
        with pytest.raises(pg.ArgumentError, match=f"{next(iter(kw))} requires grad.*torch.no_grad()"):
            polygemm.gemm(a, b, c, **kw)
    with torch.no_grad():
        got = polygemm.gemm(a, b, alpha=scale)
    torch.testing.assert_close(got, 2.0 * (a @ b), rtol=1e-5, atol=1e-5)


def test_a_torch_tensor_of_another_dtype_is_told_to_use_to():
    torch = pytest.importorskip("torch")
    with pytest.raises(DTypeError, match=r"a\.to\(torch\.float32\)"):
        pg.gemm(torch.ones(2, 2, dtype=torch.int32), torch.ones(2, 2))


@pytest.mark.parametrize("device, like", [("cpu:01", "cpu:1"), ("cpu:00", "cpu:0"), ("CPU:01", "cpu:1"),
                                          ("cpu: 1", "cpu:1"), ("cpu:+1", "cpu:1"), ("cpu:-1", "cpu:0"),
                                          ("cuda:01", "cuda:1")])
def test_a_device_index_with_a_leading_zero_is_refused_saying_how_to_write_it(device, like):
    # "cpu:01" is refused, not read as device 1 and echoed as 'cpu:1' (nor "cpu:00" run as cpu:0);
    # torch.device("cuda:01") is refused too
    a = np.ones((2, 2))
    for call in (pg.gemm, pg.explain):
        with pytest.raises(pg.ArgumentError, match=re.escape(f"e.g. {like!r}; got {device.partition(':')[2]!r}")) as info:
            call(a, a, device=device)
        assert "whole number >= 0 written in ASCII digits without a sign, spaces or leading zeros" in str(info.value)


def test_an_unreadable_device_interface_is_named_by_its_argument():
    # the message names the operand whose interface could not be read, and the way out (detach)
    for name, args in (("a", (_UnreadableInterface(), np.ones((2, 2), np.float32))),
                       ("b", (np.ones((2, 2), np.float32), _UnreadableInterface()))):
        with pytest.raises(pg.ArgumentError, match=rf"^{name}\b.*__cuda_array_interface__.*detach"):
            pg.gemm(*args)


def test_a_device_batch_one_stride_cannot_walk_is_named_with_the_shape_to_make():
    # an array polygemm does not copy (no CuPy, no torch) is told the shape it broadcasts to, not to
    # pass a contiguous array (gemm has CuPy and torch make theirs whole themselves)
    from polygemm.problem import NotWhole, normalize

    a, b = OnPluginDevice((2, 3, 4, 3), "<f4"), OnPluginDevice((3, 3, 5), "<f4")
    with pytest.raises(NotWhole, match=r"^b's batch \(3,\) .* broadcasts to \(2, 3\), which one stride cannot walk on the "
                                       r"device; .* pass b broadcast to \(2, 3, 3, 5\) and made contiguous") as exc:
        normalize(a, b)
    assert exc.value.name == "b" and exc.value.shape == (2, 3, 3, 5)


@pytest.mark.parametrize("index", range(17))
def test_matmul_agrees_with_numpy_matmul_in_shape_dtype_and_value(rng, index):
    name, a, b = list(_cases(rng))[index]
    readonly = [np.array(x) if not isinstance(x, np.ndarray) else x for x in (a, b)]
    for x in readonly:
        x.flags.writeable = False  # read-only inputs are read as they are
    want = np.matmul(a, b)
    got = pg.matmul(a, b)
    # bfloat16 stays bfloat16 (as torch.matmul keeps it; ml_dtypes' numpy.matmul loop widens it to float32)
    dtype = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else want.dtype
    assert got.shape == want.shape and got.dtype == dtype, name
    a2, b2 = (np.asarray(x) for x in (a, b))
    va, vb = a2.ndim == 1, b2.ndim == 1
    A = a2[None, :] if va else a2
    B = b2[:, None] if vb else b2
    # the bound takes matrices: each product of the broadcast batch against the float64 reference
    bshape = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    As, Bs = np.broadcast_to(A, bshape + A.shape[-2:]), np.broadcast_to(B, bshape + B.shape[-2:])
    G = _as_matrices(got, va, vb)
    for i in np.ndindex(*bshape):
        assert_close(G[i], As[i], Bs[i])


def test_a_bit_flipped_in_a_bfloat16_tensor_result_is_caught():
    """inject_fault(bit=) reads a torch bfloat16 result's bits (NumPy reads no bfloat16 tensor) and writes them back."""
    torch = _torch()
    x, y = torch.randn(6, 4).bfloat16(), torch.randn(4, 5).bfloat16()
    with polygemm.testing.inject_fault(1, 1, bit=14) as fault:
        with pytest.raises(polygemm.VerificationError, match="failed its check"):
            polygemm.gemm(x, y, verify="raise")
    assert fault.hits == 1


def test_a_bias_tensor_is_told_torchs_broadcast():
    """A 1-D torch c (a bias) is told c.expand(M, N), which polygemm takes (a NumPy broadcast of it would be refused as
    an operand of another library)."""
    torch = _torch()
    a, b, bias = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    with pytest.raises(ShapeError, match=r"c\.expand\(3, 5\)"):
        polygemm.gemm(a, b, bias)
    got = polygemm.gemm(a, b, bias.expand(3, 5))
    assert torch.allclose(got, a @ b + bias, atol=1e-5)


def test_a_tensor_that_requires_grad_is_read_under_no_grad_and_refused_with_grad_on():
    torch = _torch()
    lin = torch.nn.Linear(6, 3)
    x = torch.randn(4, 6)
    for mode in (torch.no_grad, torch.inference_mode):
        with mode():
            got = polygemm.matmul(x, lin.weight.T)
        torch.testing.assert_close(got, (x @ lin.weight.T).detach(), rtol=1e-5, atol=1e-5)
        assert not got.requires_grad
    with torch.no_grad():  # an out that requires grad is written as torch.matmul(out=) writes it there
        o = torch.zeros(4, 3, requires_grad=True)
        assert polygemm.gemm(x, lin.weight.T, out=o) is o
    torch.testing.assert_close(o.detach(), (x @ lin.weight.T).detach(), rtol=1e-5, atol=1e-5)
    with pytest.raises(polygemm.ArgumentError, match=r"^b requires grad, and polygemm records no autograd graph"):
        polygemm.matmul(x, lin.weight.T)


def test_a_tensor_beside_a_list_of_another_dtype_is_told_one_library_not_a_cast():
    # a cast of the list would be refused next for its library: the refusal that holds is said first
    torch = _torch()
    a, b = torch.randn(4, 6), torch.randn(6, 3, dtype=torch.float64)
    with pytest.raises(polygemm.ArgumentError, match=r"a is a torch\.Tensor and b a list: pass operands of one library"):
        polygemm.gemm(a, b.tolist())


@pytest.mark.parametrize("case, says", [
    ("out_dtype", r"result\.to\(torch\.bfloat16\)"),
    ("fraction", r"a\.to\(torch\.float64\)"),
    ("bool", r"a\.to\(torch\.int64\)"),
    ("c_dtype", r"out_dtype=torch\.float32"),
])
def test_refusals_of_tensors_say_casts_as_torch_spells_them(case, says):
    torch = _torch()
    f = torch.randn(4, 4)
    i, bb, bf = torch.ones(4, 4, dtype=torch.int32), torch.ones(4, 4, dtype=torch.bool), f.to(torch.bfloat16)
    call = {"out_dtype": lambda: polygemm.gemm(f, f, out_dtype=torch.bfloat16),
            "fraction": lambda: polygemm.gemm(i, i, i, alpha=2.5),
            "bool": lambda: polygemm.gemm(bb, bb, bb),
            "c_dtype": lambda: polygemm.gemm(bf, bf, f)}[case]
    with pytest.raises((polygemm.DTypeError, polygemm.ArgumentError)) as info:
        call()
    assert __import__("re").search(says, str(info.value)) and "astype" not in str(info.value) and "np." not in str(info.value)


@pytest.mark.parametrize("case, error, says", [
    ("float8", "DTypeError", r"^a is a torch\.float8_e4m3fn tensor, a dtype polygemm does not compute; cast it, e\.g\. a\.to\(torch\.float32\)"),
    ("complex32", "DTypeError", r"a\.to\(torch\.complex64\)"),
    ("sparse", "ArgumentError", r"^a is a torch tensor of layout torch\.sparse_coo.*a\.to_dense\(\)"),
    ("meta", "ArgumentError", r"^a is a tensor on torch's meta device"),
])
def test_tensors_polygemm_cannot_read_are_refused_in_torchs_terms(case, error, says):
    torch = _torch()
    a, b = torch.ones(4, 6), torch.ones(6, 3)
    if case == "float8":
        a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    elif case == "complex32":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch: ComplexHalf support is experimental)
            a, b = a.to(torch.complex32), b.to(torch.complex32)
    elif case == "sparse":
        a = a.to_sparse()
    else:
        a, b = a.to("meta"), b.to("meta")
    with pytest.raises(getattr(polygemm, error), match=says):
        polygemm.gemm(a, b)


def test_tensors_without_data_of_their_own_are_refused_not_read_through_dlpack():
    """A FakeTensor (whose DLPack capsule points at memory that is not its data), a tensor inside torch.func.vmap, a
    nested tensor and a MaskedTensor are refused in torch's terms by gemm and by matmul, before any value is read."""
    import warnings

    torch = _torch()
    from polygemm.errors import ArgumentError

    fake_mode = pytest.importorskip("torch._subclasses.fake_tensor").FakeTensorMode()
    fake = fake_mode.from_tensor(torch.ones(64, 64))
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(ArgumentError, match=r"^a is a FakeTensor.*no data of its own"):
            call(fake, torch.ones(64, 64))
    with pytest.raises(ArgumentError, match=r"inside a torch\.func transform"):
        torch.func.vmap(pg.matmul)(torch.ones(2, 3, 4), torch.ones(2, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warnings for nested and masked tensors
        nested = [torch.nested.nested_tensor([torch.ones(3, 4)] * 2)]
        if hasattr(torch, "jagged"):
            nested.append(torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(2, 4)], layout=torch.jagged))
        masked = torch.masked.masked_tensor(torch.ones(3, 4), torch.ones(3, 4, dtype=torch.bool))
    for nt in nested:
        for call in (pg.gemm, pg.matmul):
            with pytest.raises(ArgumentError, match=r"^a is a nested torch tensor.*a\.to_padded_tensor\(0\)"):
                call(nt, torch.ones(4, 5))
    with pytest.raises(ArgumentError, match=r"^a is a torch MaskedTensor.*a\.to_tensor\(0\)"):
        pg.matmul(masked, torch.ones(4, 5))
    assert_close(pg.matmul(masked.to_tensor(0), torch.ones(4, 5)).numpy(), np.ones((3, 4), np.float32), np.ones((4, 5), np.float32))


def test_zero_tensors_are_told_clone_not_a_transform():
    """A ZeroTensor (autograd's zeros of no memory) outside any transform is told to pass its clone (an out: a tensor of
    memory of its own), not to leave a torch.func transform it is not in."""
    torch = _torch()
    from polygemm.errors import ArgumentError

    if not hasattr(torch, "_efficientzerotensor"):
        pytest.skip("a torch without ZeroTensors")
    zeros = torch._efficientzerotensor((3, 4))
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(ArgumentError, match=r"^a is a ZeroTensor.*a\.clone\(\)") as err:
            call(zeros, torch.ones(4, 2))
        assert "transform" not in str(err.value)
    with pytest.raises(ArgumentError, match=r"^c is a ZeroTensor.*c\.clone\(\)"):
        pg.gemm(torch.ones(3, 4), torch.ones(4, 2), torch._efficientzerotensor((3, 2)))
    with pytest.raises(ArgumentError, match=r"^out is a ZeroTensor.*omit out") as err:
        pg.matmul(torch.ones(3, 4), torch.ones(4, 2), out=torch._efficientzerotensor((3, 2)))
    assert "clone" not in str(err.value)
    assert_close(pg.matmul(zeros.clone(), torch.ones(4, 2)).numpy(), np.zeros((3, 4), np.float32), np.ones((4, 2), np.float32))


def test_quantized_tensors_are_told_dequantize_and_unsigned_mixes_get_a_cast():
    import warnings

    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantize_per_tensor is deprecated in newer torch
        q = torch.quantize_per_tensor(torch.ones(3, 4), 0.1, 0, torch.qint8)
    with pytest.raises(DTypeError, match=r"^a is a quantized torch\.qint8 tensor.*a\.dequantize\(\)"):
        pg.matmul(q, torch.ones(4, 3))
    if hasattr(torch, "uint64"):  # torch promotes uint64 with no other dtype: NumPy's promotion is said
        with pytest.raises(DTypeError, match=r"a and b must share one dtype.*int64.*uint64"):
            pg.matmul(torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2, dtype=torch.uint64))


def test_matmul_names_a_torch_out_given_when_its_elements_may_share_memory():
    """A vector result into an expanded torch out: refused of that out, (2, 3), with torch.empty of its shape (not of
    the (2, 3, 1) view matmul makes of it, nor NumPy's np.empty)."""
    torch = _torch()
    out = torch.zeros(3).expand(2, 3)
    with pytest.raises(polygemm.ArgumentError, match=r"^out has shape \(2, 3\) and strides \(0, 1\).*torch\.empty\(\(2, 3\)"):
        pg.matmul(torch.ones(2, 3, 4), torch.ones(4), out=out)


def test_a_torch_alpha_the_call_refuses_is_quoted_as_the_caller_wrote_it():
    """A 0-D tensor alpha that is no finite real number is quoted as torch prints it (tensor(inf)), not as the NumPy
    element polygemm read from it (np.float32(inf), np.True_)."""
    from polygemm.errors import ArgumentError, ArgumentTypeError

    torch = _torch()
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with pytest.raises(ArgumentError, match=r"alpha must be finite; got tensor\(inf\)$"):
        pg.gemm(a, b, alpha=torch.tensor(float("inf")))
    with pytest.raises(ArgumentTypeError, match=r"got tensor\(True\) \(Tensor\)"):
        pg.gemm(a, b, alpha=torch.tensor(True))


def test_torchs_dtype_keyword_is_told_out_dtype_in_torchs_spelling():
    torch = _torch()
    a, b = torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 2, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'dtype'.*out_dtype=torch\.float32") as info:
        pg.gemm(a, b, dtype=torch.float32)
    assert "np.float32" not in str(info.value)


def test_an_overlapping_cpu_torch_out_is_told_torch_empty():
    torch = _torch()
    out = torch.empty(40).as_strided((2, 3, 5), (5, 5, 1))
    with pytest.raises(polygemm.ArgumentError, match=r"overlap.*torch\.empty\(\(2, 3, 5\), dtype=torch\.float32\)") as info:
        pg.matmul(torch.randn(2, 3, 4), torch.randn(4, 5), out=out)
    assert "np.empty" not in str(info.value)


def test_a_tensor_subclass_answering_torch_functions_itself_is_refused_saying_how_to_pass_its_memory():
    # its attributes answer through its own __torch_function__ (here: nonsense), and its memory need not hold the values
    # it stands for; Parameter (torch's own way of keeping torch's functions) and plain subclasses are read as tensors
    torch = _torch()

    class Overriding(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return "override"

    class Plain(torch.Tensor):
        pass

    a, b = torch.ones(4, 3), torch.ones(3, 5)
    for call in (pg.matmul, pg.gemm):
        with pytest.raises(pg.ArgumentError, match=r"^a is a Overriding, a torch.Tensor subclass with its own "
                                                   r"__torch_function__.*a\.as_subclass\(torch\.Tensor\)"):
            call(a.as_subclass(Overriding), b)
    assert torch.equal(pg.matmul(a.as_subclass(Plain), b), a @ b)
    with torch.no_grad():
        assert torch.equal(pg.matmul(a, torch.nn.Parameter(b)), a @ b)


def test_a_lazy_modules_uninitialized_parameter_is_told_to_run_the_module_first():
    torch = _torch()
    with pytest.raises(pg.ArgumentError, match=r"^a is an uninitialized parameter of a lazy module .* run the module's "
                                               r"forward once first"):
        pg.matmul(torch.nn.UninitializedParameter(), torch.randn(3, 2))


@pytest.mark.parametrize("name", ["a", "b", "c", "out"])
def test_a_dual_tensor_of_forward_ad_is_refused_naming_its_primal(name):
    # polygemm computes no tangent: a result of a dual operand would drop it silently; torch.inference_mode drops it in
    # torch's own matmul too, and the primal (or a tensor without a tangent inside the level) computes as ever
    import warnings

    torch = _torch()
    fwAD = torch.autograd.forward_ad
    args = {"a": torch.randn(5, 7), "b": torch.randn(7, 3), "c": torch.randn(5, 3), "out": torch.empty(5, 3)}
    with fwAD.dual_level():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # (newer torch: its jvp decompositions' torch.jit.script)
            dual = fwAD.make_dual(args[name], torch.randn_like(args[name]))
        given = dict(args, **{name: dual})
        call = lambda **kw: pg.gemm(given["a"], given["b"], given["c"], out=given["out"], **kw)  # noqa: E731
        way = r"omit out" if name == "out" else r"torch\.matmul"
        with pytest.raises(pg.ArgumentError, match=rf"^{name} is a dual tensor of forward-mode AD .*"
                                                   rf"unpack_dual\({name}\)\.primal.*{way}"):
            call()
        with pytest.raises(pg.ArgumentError, match=rf"^{name} is a dual tensor"):
            pg.explain(given["a"], given["b"], given["c"], out=given["out"])
        with torch.inference_mode():
            call()
        given[name] = fwAD.unpack_dual(dual).primal
        got = call()
    torch.testing.assert_close(got, args["a"] @ args["b"] + args["c"])


def test_an_open_forward_ad_level_keeps_tensors_out_of_the_plan_caches_views(monkeypatch):
    # a repeated call with CUDA tensors is bound from their views alone, which no tangent is part of: while a level is
    # open every tensor goes to the full read (which refuses a dual one), and the views come back once it is closed
    import types

    from polygemm.core.views import operand_view
    from polygemm.interop import torch_view, torch_views
    from tests.helpers import fake_torch

    Tensor = fake_torch(monkeypatch)
    level = types.SimpleNamespace(_current_level=-1)
    __import__("sys").modules["torch"].autograd = types.SimpleNamespace(forward_ad=level)
    a, b = Tensor(0x1000, (8, 4), (4, 1)), Tensor(0x2000, (4, 6), (6, 1))
    assert torch_views(a, b, None, None) is not None and torch_view(a) is not None
    level._current_level = 0
    assert torch_views(a, b, None, None) is None
    assert torch_view(a) is None and operand_view(a) is None
    level._current_level = -1
    assert torch_views(a, b, None, None) is not None and operand_view(a) is not None


def test_a_tensor_subclass_of_user_code_is_a_torch_operand():
    # a subclass defined here (its module is this test's, not torch's) is torch's: a NumPy operand beside it is told
    # the one-library refusal, casts are said as torch spells them, and a new result is a plain torch.Tensor
    torch = _torch()
    from polygemm.interop import kind_of

    class Plain(torch.Tensor):
        pass

    a = torch.ones(4, 3).as_subclass(Plain)
    assert kind_of(a) == "torch"
    with pytest.raises(pg.ArgumentError, match=r"^a is a .*Plain and b a ndarray: pass operands of one library"):
        pg.gemm(a, np.ones((3, 5), np.float32))
    with pytest.raises(DTypeError, match=r"a\.to\(torch\.float64\)") as info:
        pg.gemm(a, torch.ones(3, 5, dtype=torch.float64))
    assert "astype" not in str(info.value) and "np." not in str(info.value)
    got = pg.gemm(a, torch.ones(3, 5))
    assert type(got) is torch.Tensor and torch.equal(got, torch.full((4, 5), 3.0))


@pytest.mark.parametrize("c, way", [
    (1.0, r"torch\.full\(\(5, 3\), 1\.0, dtype=a\.dtype, device=a\.device\)"),
    ([1.0, 2.0, 3.0], r"torch\.as_tensor\(c, dtype=a\.dtype, device=a\.device\)\.expand\(5, 3\)"),
    (np.ones((5, 3)), r"torch\.as_tensor\(c, dtype=a\.dtype, device=a\.device\)\)$"),
])
def test_a_c_of_another_library_beside_tensors_is_told_one_library_first(c, way):
    # its shape or dtype hints would be NumPy's (np.broadcast_to, a cast to float32), and the one-library refusal
    # would follow them: it is said first, with the torch way, by gemm, a checked gemm and explain alike
    torch = _torch()
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    for call in (pg.gemm, pg.explain, lambda *args: pg.gemm(*args, verify="raise")):
        with pytest.raises(pg.ArgumentError, match=rf"^a is a torch\.Tensor and c a \w+: pass operands of one library.*{way}") \
                as info:
            call(a, b, c)
        assert "np." not in str(info.value)
    with pytest.raises(pg.ArgumentError, match=r"dtype=out\.dtype"):
        pg.gemm(a, b, c, out=torch.empty(5, 3))
    made = torch.as_tensor(c, dtype=a.dtype, device=a.device).expand(5, 3)  # the way named, taken
    torch.testing.assert_close(pg.gemm(a, b, made), a @ b + made)


@pytest.mark.parametrize("other, keep, narrow, loses", [
    ("float16", "float64", "float16", r"exact only for values below 2\*\*11 in magnitude; those of 65520 or more overflow to inf"),
    ("complex64", "complex128", "complex64", r"exact only for values below 2\*\*24 in magnitude"),
])
def test_an_int64_tensor_beside_a_narrower_float_is_told_a_cast_that_keeps_its_values(other, keep, narrow, loses):
    # torch promotes int64 with float16 to float16 (inf above 65504) and with complex64 to complex64 (exact below 2**24):
    # the cast that keeps the values comes first, saying the product runs in it; torch's follows, saying what it loses
    torch = _torch()
    a, b = torch.ones(2, 2, dtype=torch.int64), torch.ones(2, 2, dtype=getattr(torch, other))
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, b)
    text = str(info.value)
    first, _, then = text.partition(", or ")
    assert f"a.to(torch.{keep})" in first and f"b.to(torch.{keep})" in first and f"runs in {keep}" in first
    assert f"a.to(torch.{narrow})" in then and re.search(loses, then) and "which rounds int64" not in text


def test_explain_and_last_plan_name_torchs_copy_of_a_lazy_conjugate_or_negation():
    # torch resolves a CPU tensor's conjugate bit, and any tensor's negative bit, into a new tensor: a whole copy,
    # named among the plan's copies as others are
    torch = _torch()
    z, w = torch.randn(5, 7, dtype=torch.complex64), torch.randn(7, 3, dtype=torch.complex64)
    plan = pg.explain(z.conj(), w)
    assert any(line.startswith("a copied once by torch, a.resolve_conj()") for line in plan.copies)
    assert "copies  : none" not in str(plan)
    got = pg.matmul(w.T, z.conj().T)
    assert any("b.resolve_conj()" in line for line in pg.last_plan().copies)
    torch.testing.assert_close(got, w.T @ z.conj().T.resolve_conj())
    assert any("c.resolve_neg()" in line for line in pg.explain(z.real, z.real.T, _negated(torch, (5, 5))).copies)
    pg.matmul(z, w)
    assert pg.last_plan().copies == []


def test_a_tensor_beside_an_object_offering_only_dlpack_gives_a_tensor_in_any_place():
    # an object offering only DLPack takes no side: the tensor decides the result's kind wherever it stands
    torch = _torch()
    a, b, c = torch.randn(4, 6), torch.randn(6, 5), torch.randn(4, 5)
    for args in ((DLPackOnly(a), b), (a, DLPackOnly(b)), (DLPackOnly(a), DLPackOnly(b), c)):
        for _ in range(2):  # planned, then from the cache
            got = pg.gemm(*args)
            assert isinstance(got, torch.Tensor)
            torch.testing.assert_close(got, a @ b + (c if len(args) == 3 else 0), rtol=1e-5, atol=1e-5)


def test_matmul_and_explain_take_objects_offering_only_dlpack_as_gemm_does():
    torch = _torch()
    a, b = torch.randn(4, 6), torch.randn(6, 5)
    for x, y, want in ((DLPackOnly(a), b, a @ b), (DLPackOnly(a[0]), b, a[0] @ b), (a, DLPackOnly(b[:, 0]), a @ b[:, 0])):
        got = pg.matmul(x, y)
        assert isinstance(got, torch.Tensor) and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    o = torch.empty(5)
    assert pg.matmul(a[0], b, out=DLPackOnly(o)) is not None
    torch.testing.assert_close(o, a[0] @ b, rtol=1e-5, atol=1e-5)
    notes = pg.explain(DLPackOnly(a[0].numpy()), DLPackOnly(b.numpy())).notes
    assert any("a is a vector (1-D), taken as a row" in n for n in notes)


def test_explain_of_cpu_tensors_plans_and_caches_as_gemm_does():
    # gemm plans plain CPU tensors through NumPy views of their memory, a plan the cache keeps: explain says so (and
    # warms the cache for the call), not that each call plans again
    torch = _torch()
    pg.clear_plan_cache()
    a, b, o = torch.randn(40, 60), torch.randn(60, 50), torch.empty(40, 50)
    plan = pg.explain(a, b, out=o)
    assert not plan.uncached and not plan.cached
    pg.gemm(a, b, out=o)
    assert pg.last_plan().cached and pg.explain(a, b, out=o).cached
    with pytest.raises(DTypeError, match=r"a\.to\(torch\.float64\)"):  # a refusal still in torch's terms
        pg.explain(a, b.double())


@pytest.mark.parametrize("out", ["list", "empty", "two"])
def test_matmul_told_an_out_of_several_or_none_says_a_one_element_tuple_in_torchs_terms(out):
    torch = _torch()
    a, b, o = torch.randn(5, 7), torch.randn(7, 3), torch.empty(5, 3)
    given = {"list": [o], "empty": (), "two": (o, o)}[out]
    for call in (pg.matmul, pg.explain):
        with pytest.raises(pg.ArgumentTypeError, match=r"^out must be a torch tensor that can receive the result, or a "
                                                       r"one-element tuple of it") as info:
            call(a, b, out=given)
        assert "NumPy" not in str(info.value)
    assert pg.matmul(a, b, out=(o,)) is o


def test_a_host_c_beside_a_tensor_on_a_device_is_asked_its_device_not_its_cuda_interface():
    # torch's CUDA interface raises RuntimeError for a tensor that requires grad (read under no_grad): the check for
    # device operands asks the tensor's device, so the call reaches polygemm's own refusal of a c on the host
    torch = _torch()

    class OnCuda(torch.Tensor):  # a CPU tensor that says it is on a GPU, as far as the check can tell
        @property
        def device(self):
            return torch.device("cuda", 0)

    t = torch.ones(2, 2).as_subclass(OnCuda).requires_grad_()
    with torch.no_grad(), pytest.raises(pg.PolygemmError) as info:
        pg.gemm(t, t, np.ones((2, 2), np.float32), beta=1.0)
    assert "torch.as_tensor" not in str(info.value)  # (the one-library hint is for host tensors)


def test_a_c_that_does_not_broadcast_is_told_its_shape_not_an_expand_that_fails():
    torch = _torch()
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    with pytest.raises(pg.ArgumentError, match=r"c has shape \(15,\); it must broadcast to the result's \(5, 3\)") as info:
        pg.gemm(a, b, np.ones(15, np.float32))
    assert ".expand(" not in str(info.value)
    with pytest.raises(pg.ArgumentError, match=r"\.expand\(5, 3\)"):
        pg.gemm(a, b, np.ones((1, 3), np.float32))


def test_a_tensor_with_both_bits_is_named_as_torch_resolves_it():
    # resolve_conj materializes a tensor with both bits: no resolve_neg follows, and the copy note names none
    torch = _torch()
    z = torch.randn(3, 3, dtype=torch.complex64)
    x = torch._neg_view(z.conj())
    torch.testing.assert_close(pg.gemm(x, z), x.resolve_conj() @ z)
    (note,) = pg.last_plan().copies
    assert "a.resolve_conj()" in note and "resolve_neg" not in note


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "int32"])
def test_cpu_tensors_are_planned_once_and_computed_through_views_of_their_memory(dtype):
    # a torch user's CPU call (a module's Parameter among its operands, read under no_grad) is planned once and cached,
    # as a NumPy call is: its tensors are read through NumPy views of their own memory, the result a tensor again
    torch = _torch()
    tdt = getattr(torch, dtype)
    a = (torch.randn(6, 5) * 3).to(tdt)
    w = torch.nn.Parameter((torch.randn(4, 5) * 3).to(tdt), requires_grad=dtype.startswith(("float", "complex")))
    out = torch.empty(6, 4, dtype=tdt)
    with torch.no_grad():
        pg.gemm(a, w.T, out=out)
        before = pg.plan_cache_info()["hits"]
        version = out._version
        got = pg.gemm(a, w.T, out=out)
        assert got is out and out._version > version  # written in place, as torch's own out= tells autograd
        assert pg.plan_cache_info()["hits"] == before + 1
        assert "not cached" not in str(pg.last_plan())
        new = pg.gemm(a, w.T)
    assert type(new) is torch.Tensor and new.dtype == tdt
    wide = torch.complex128 if dtype == "complex64" else torch.float64
    want = a.to(wide) @ w.detach().to(wide).T
    loose = dtype == "float16"
    torch.testing.assert_close(new.to(wide), want, rtol=2e-2 if loose else 1e-5, atol=2e-1 if loose else 1e-4)
    torch.testing.assert_close(out, new)


def test_inside_functionalize_cpu_tensors_are_refused_not_read_through_their_wrappers():
    # functionalize's tensors are plain torch.Tensor wrappers whose own memory holds none of their values: the call is
    # refused as other transforms' are, never computed from that memory (which gave garbage, and an out left unwritten)
    torch = _torch()
    functionalize = getattr(getattr(torch, "func", None), "functionalize", None)
    if functionalize is None:
        pytest.skip("this torch has no torch.func.functionalize")
    x, w = torch.randn(2, 4), torch.randn(4, 3)
    with pytest.raises(pg.ArgumentError, match=r"inside a torch\.func transform"):
        functionalize(pg.matmul)(x, w)

    def into_out(x):
        o = torch.zeros(2, 3)
        pg.matmul(x, w, out=o)
        return o

    with pytest.raises(pg.ArgumentError, match=r"inside a torch\.func transform"):
        functionalize(into_out)(x)


def test_a_function_torch_compile_traces_calls_polygemm_on_the_real_tensors():
    """TorchDynamo cannot trace polygemm's own code (it reads arrays through DLPack's and CUDA's interfaces): under
    torch.compile each public call is a graph break and runs on the real tensors, the traced ops around it compiled,
    the results as an uncompiled call gives them (out written, explain's plan handed back)."""
    torch = _torch()
    compiler = getattr(torch, "compiler", None)
    if not callable(getattr(compiler, "disable", None)) or not hasattr(torch, "compile"):
        pytest.skip("this torch has no torch.compile and torch.compiler.disable")
    torch._dynamo.reset()
    x, w, bias = torch.randn(5, 8), torch.randn(8, 3), torch.randn(5, 3)

    def layer(x, w, bias):
        y = pg.matmul(x * 2, w)
        z = pg.gemm(x, w, bias, alpha=0.5, beta=2.0)
        o = torch.empty(5, 3)
        pg.gemm(x, w, out=o)
        return torch.relu(y) + z + o, pg.explain(x, w).variant

    got, variant = torch.compile(layer, backend="eager")(x, w, bias)
    want = torch.relu((x * 2) @ w) + (0.5 * (x @ w) + 2.0 * bias) + x @ w
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert variant == pg.explain(x, w).variant
    with pytest.raises(Exception, match=r"(?i)torch\.compiler\.disable|graph break"):  # fullgraph: torch's own refusal
        torch.compile(lambda x, w: pg.matmul(x, w) + 1, backend="eager", fullgraph=True)(x, w)
    torch._dynamo.reset()


def test_outside_torch_compile_a_call_runs_as_it_is():
    """Outside torch.compile's tracing the call asks torch's own flag and goes on: no disabled wrapper is made."""
    from polygemm import api
    from polygemm.interop import torch as interop_torch

    torch = _torch()
    asked = []
    monkeypatch = pytest.MonkeyPatch()
    try:
        monkeypatch.setattr(interop_torch, "_is_compiling", lambda: bool(asked.append(1)))
        monkeypatch.setattr(api, "eager", lambda fn: pytest.fail("a wrapper made outside tracing"))
        x = torch.randn(3, 4)
        torch.testing.assert_close(pg.matmul(x, x.T), x @ x.T)
    finally:
        monkeypatch.undo()
    assert asked
