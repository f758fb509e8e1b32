"""Bad inputs raise the documented exception type, naming the argument and the way out."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm import errors


def f32(*shape):
    return np.ones(shape, np.float32)


def test_hierarchy():
    assert issubclass(errors.ShapeError, (errors.PolygemmError, ValueError))
    assert issubclass(errors.DTypeError, (errors.PolygemmError, TypeError))
    assert issubclass(errors.BackendUnavailableError, (errors.PolygemmError, RuntimeError))
    assert issubclass(errors.UnsupportedProblemError, (errors.PolygemmError, ValueError))
    assert issubclass(errors.DeviceError, (errors.PolygemmError, RuntimeError))
    assert issubclass(errors.ArgumentError, (errors.PolygemmError, ValueError))
    assert pg.ShapeError is errors.ShapeError


@pytest.mark.parametrize(
    "args,kwargs,exc,fragment",
    [
        ((f32(2, 3, 4), f32(3, 4, 2)), {}, errors.ShapeError, "do not broadcast"),
        ((f32(2, 3), f32(3)), {}, errors.ShapeError, "b must be a matrix or a stack of matrices (at least 2-D)"),
        ((f32(2, 3), f32(4, 2)), {}, errors.ShapeError, "a's matrices are (2, 3) and b's (4, 2)"),
        ((np.zeros((2, 3), "U1"), f32(3, 2)), {}, errors.DTypeError, "float16, float32 or float64"),
        ((np.ones((2, 3), bool), f32(3, 2)), {}, errors.DTypeError, "one dtype"),
        ((np.ones((2, 3), complex), f32(3, 2)), {}, errors.DTypeError, "complex128"),
        ((np.array([[object()]]), f32(1, 1)), {}, errors.DTypeError, "object"),
        ((f32(2, 3), np.ones((3, 2), np.float64)), {}, errors.DTypeError, "one dtype"),
        ((f32(2, 3), f32(3, 2), f32(3, 2)), {"beta": 1.0}, errors.ShapeError, "c must have the result's shape (2, 2)"),
        ((f32(2, 3), f32(3, 2), np.ones((2, 2), np.float64)), {"beta": 1.0}, errors.DTypeError, "c must have the dtype of the result"),
        ((f32(2, 3), f32(3, 2)), {"beta": 0.5}, errors.ArgumentError, "needs c"),
        ((f32(2, 3), f32(3, 2)), {"alpha": float("nan")}, errors.ArgumentError, "alpha must be finite"),
        ((f32(2, 3), f32(3, 2), f32(2, 2)), {"beta": float("inf")}, errors.ArgumentError, "beta must be finite"),
        ((f32(2, 3), f32(3, 2)), {"alpha": "2"}, errors.ArgumentError, "alpha must be a real number"),
        ((f32(2, 3), f32(3, 2)), {"alpha": 1j}, errors.ArgumentError, "alpha must be a real number"),
        ((f32(2, 3), f32(3, 2)), {"out": f32(3, 3)}, errors.ShapeError, "out must have the result's shape (2, 2)"),
        ((f32(2, 3), f32(3, 2)), {"out": np.ones((2, 2), np.float64)}, errors.DTypeError, "the result dtype must be float32"),
        ((f32(2, 3), f32(3, 2)), {"out": [[0.0, 0.0], [0.0, 0.0]]}, errors.ArgumentError, "out must be a NumPy array"),
        ((f32(2, 3), f32(3, 2)), {"variant": ""}, errors.ArgumentError, "variant must be"),
        ((f32(2, 3), f32(3, 2)), {"variant": "nosuch", "device": "cpu"}, errors.UnsupportedProblemError, "known: blas, reference"),
        ((f32(2, 3), f32(3, 2)), {"device": "nosuch"}, errors.BackendUnavailableError, "known devices: cpu, cuda, musa"),
    ],
)
def test_bad_inputs(args, kwargs, exc, fragment):
    with pytest.raises(exc) as info:
        pg.gemm(*args, **kwargs)
    assert fragment in str(info.value)
    if not any(getattr(x, "ndim", 2) == 1 for x in args):  # explain takes matmul's vectors, which gemm refuses
        with pytest.raises(exc):  # explain validates as gemm does
            pg.explain(*args, **kwargs)


def test_out_must_not_overlap_inputs():
    a, b = f32(4, 4), f32(4, 4)
    with pytest.raises(errors.ArgumentError, match="out overlaps a"):
        pg.gemm(a, b, out=a)
    with pytest.raises(errors.ArgumentError, match="out overlaps b"):
        pg.gemm(a, b, out=b.T)


def test_out_partly_overlapping_c():
    big = np.zeros((5, 4), np.float32)
    c, out = big[:4], big[1:]
    with pytest.raises(errors.ArgumentError, match="partly overlaps c"):
        pg.gemm(f32(4, 3), f32(3, 4), c, beta=1.0, out=out)


def test_out_read_only_and_nothing_half_written():
    out = np.full((2, 2), 7.0, np.float32)
    out.flags.writeable = False
    with pytest.raises(errors.ArgumentError, match="read-only"):
        pg.gemm(f32(2, 3), f32(3, 2), out=out)
    assert (out == 7.0).all()


def test_no_fallback_for_explicit_device():
    # an unavailable explicit device raises; it never silently runs on the CPU
    missing = [i for i in pg.backends() if not i.available]
    if not missing:
        pytest.skip("every backend is available on this machine")
    for info in missing:
        with pytest.raises(errors.BackendUnavailableError) as exc:
            pg.gemm(f32(2, 2), f32(2, 2), device=info.name)
        assert f"device {info.name!r} is unavailable" in str(exc.value)
        assert info.reason in str(exc.value) and "cpu: available" in str(exc.value)


def test_device_and_out_dtype_mistakes_name_what_to_pass():
    """A device that is not a string is an ArgumentError (a ValueError) naming the accepted
    spelling; get_backend takes names as device= does ("CPU"); an out_dtype in non-native byte
    order says to pass the native one instead of contradicting itself."""
    a = np.ones((2, 2))
    with pytest.raises(pg.ArgumentError, match=r"device must be a backend name .* got 0 \(int\)"):
        pg.gemm(a, a, device=0)
    assert pg.get_backend("CPU").name == "cpu"
    swapped = ">f8" if np.little_endian else "<f8"
    with pytest.raises(pg.DTypeError, match="non-native byte order; .* pass 'float64'"):
        pg.gemm(a, a, out_dtype=swapped)


@pytest.mark.parametrize("call", ["gemm", "matmul", "explain", "get_backend", "env"])
def test_an_unknown_device_name_is_a_value_error_too(call, monkeypatch):
    # numpy/cupy raise ValueError for an argument value they do not take; a device name polygemm does not know (a
    # typo) is a ValueError too (beside BackendUnavailableError, a RuntimeError), so `except ValueError` catches it
    a, b = f32(2, 3), f32(3, 4)
    out = np.full((2, 4), 7.0, np.float32)
    if call == "env":
        monkeypatch.setenv("POLYGEMM_DEVICE", "cdua")
    run = {"gemm": lambda: pg.gemm(a, b, out=out, device="cdua"),
           "matmul": lambda: pg.matmul(a, b, out=out, device="cdua"),
           "explain": lambda: pg.explain(a, b, device="cdua"),
           "get_backend": lambda: pg.get_backend("cdua"),
           "env": lambda: pg.gemm(a, b, out=out)}[call]
    with pytest.raises(ValueError, match="unknown device 'cdua' \\(did you mean 'cuda'\\?\\)") as got:
        run()
    assert isinstance(got.value, errors.BackendUnavailableError) and isinstance(got.value, errors.UnknownDeviceError)
    assert pg.UnknownDeviceError is errors.UnknownDeviceError
    assert (out == 7.0).all()  # nothing written


def test_an_unavailable_known_device_is_not_an_unknown_one():
    # a known backend that cannot run here stays a RuntimeError only: nothing about the name is wrong
    info = {i.name: i for i in pg.backends()}
    off = next((n for n, i in info.items() if not i.available), None)
    if off is None:
        pytest.skip("every backend is available on this machine")
    with pytest.raises(errors.BackendUnavailableError) as got:
        pg.gemm(f32(2, 3), f32(3, 4), device=off)
    assert not isinstance(got.value, ValueError)


def test_the_matrix_names_an_unknown_backend_with_the_same_class():
    # a typo in the conformance matrix's --backends is an UnknownDeviceError, as it is in device=
    from polygemm.apps.matrix import check_names
    with pytest.raises(errors.UnknownDeviceError, match="unknown backend 'cdua' \\(did you mean 'cuda'\\?\\)"):
        check_names(["cpu", "cdua"])


def test_an_operand_numpy_cannot_read_is_a_dtype_error_with_numpys_reason():
    class Unreadable:
        def __array__(self, *args, **kwargs):
            raise RuntimeError("values are on a remote host")

    with pytest.raises(errors.DTypeError) as info:
        pg.gemm(Unreadable(), np.ones((2, 2), np.float32), device="cpu")
    says = str(info.value)
    assert says.startswith("a ") and "could not be converted to an array" in says and "remote host" in says


def test_lazy_submodules_are_attributes_and_listed():
    import polygemm

    assert "testing" in dir(polygemm) and "dask" in dir(polygemm) and "gemm" in dir(polygemm)
    from polygemm.testing import check_result

    assert polygemm.testing.check_result is check_result
    with pytest.raises(AttributeError, match="no attribute 'gemmm'"):
        polygemm.gemmm  # noqa: B018


@pytest.mark.parametrize("ab,c_dtype", [(np.int64, np.float32), (np.uint64, np.int64), (np.int64, np.uint64)])
def test_a_c_of_another_dtype_is_told_where_casting_a_and_b_up_stops_being_exact(ab, c_dtype):
    # float64 holds int64 and uint64 values exactly only below 2**53: the hint says so beside the cast it offers
    a = np.array([[2**53 + 1]], ab)
    with pytest.raises(errors.DTypeError, match="c must have the dtype of the result") as info:
        pg.gemm(a, np.ones((1, 1), ab), np.zeros((1, 1), c_dtype), beta=1.0)
    text = str(info.value)
    assert "a.astype(np.float64)" in text and "exact only for values below 2**53" in text.split(", or ")[0]


def test_a_and_b_in_two_places_are_told_so_before_a_cast():
    # a host array beside a device one of another dtype: where they live comes first (a cast would not help)
    from tests.helpers import OnPluginDevice

    device_b = OnPluginDevice((3, 2), "<f2")
    for a in (np.ones((2, 3), np.float32), np.ones((2, 3), np.float16)):
        with pytest.raises(errors.ArgumentError, match=r"operands live in different places \(a on host, b on fakedev\)"):
            pg.gemm(a, device_b)


def test_a_sparse_matrix_is_told_to_pass_its_dense_array():
    class Sparse:  # what NumPy makes of a SciPy sparse matrix: an object array holding it
        def toarray(self):
            return np.ones((2, 2))

    with pytest.raises(errors.DTypeError, match=r"NumPy reads as an object array; .*a\.toarray\(\) for a SciPy sparse"):
        pg.gemm(Sparse(), np.ones((2, 2)))
