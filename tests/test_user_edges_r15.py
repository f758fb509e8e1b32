"""A new user's first contact, fifteenth round (CPU): ``pip install polygemm`` on a laptop without a
GPU, the README and docs/ followed as written. What such a machine says about the cuda backend, the
compile command's help beside what it does, the hint given for operands of two dtypes and for an
``out`` or ``out_dtype`` of another dtype beside numpy.matmul's conventions, ``polygemm.testing``
and ``polygemm.dask`` as attributes after ``import polygemm``, and ``device="gpu"``. The tests
marked "defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.errors import BackendUnavailableError, DTypeError

BF16 = np.dtype(ml_dtypes.bfloat16)


# -- the cuda backend on a machine without an NVIDIA driver --------------------------------------------------------------


def _cuda_probe(monkeypatch, driver_loads: bool) -> pg.Availability:
    """A fresh cuda backend's probe with pycuda unimportable and libcuda loading or not."""
    from polygemm.backends.cuda import CudaBackend

    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    real = ctypes.CDLL

    def cdll(name, *args, **kwargs):
        if name in ("libcuda.so.1", "nvcuda.dll"):
            if driver_loads:
                return object()
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    return CudaBackend().probe()


def test_without_an_nvidia_driver_cuda_says_so_not_to_install_pycuda(monkeypatch):
    # defect: on a laptop without an NVIDIA GPU, polygemm info and device="cuda" said "pycuda is not importable
    # ...; install it with pip install 'polygemm[cuda]'": a source build that needs cuda.h and libcuda.so, after
    # which the backend would still be unavailable. (PyCUDA installed without a driver fails its import the same way.)
    av = _cuda_probe(monkeypatch, driver_loads=False)
    assert not av.ok
    first, *rest = av.reason.splitlines()
    assert first.startswith("no NVIDIA driver (libcuda.so.1 does not load") or first.startswith("no NVIDIA driver (nvcuda.dll")
    assert "needs an NVIDIA GPU and its driver" in first and "pip install" not in first and len(first) <= 120
    assert any("cannot open shared object file" in line for line in rest)  # the loader's words, for info -v
    assert any("pip install 'polygemm[cuda]'" in line for line in rest)  # what to do once there is a GPU


def test_with_a_driver_but_no_pycuda_cuda_still_says_to_install_it(monkeypatch):
    av = _cuda_probe(monkeypatch, driver_loads=True)
    assert not av.ok
    assert av.reason.startswith("pycuda is not importable") and "pip install 'polygemm[cuda]'" in av.reason


def test_info_on_this_machine_names_what_cuda_lacks(capsys):
    # on a machine with a working cuda backend there is nothing to check here
    info = {i.name: i for i in pg.backends()}["cuda"]
    if info.available:
        pytest.skip("the cuda backend is available here")
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.lstrip().startswith("cuda "))
    assert "unavailable" in line
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert "no NVIDIA driver" in line
    with pytest.raises(BackendUnavailableError, match="device 'cuda' is unavailable: " + info.reason.split("(")[0]):
        pg.gemm(np.ones((2, 2)), np.ones((2, 2)), device="cuda")


# -- polygemm compile --help beside what it does -------------------------------------------------------------------------


def test_compile_help_names_the_compiler_order_it_follows(capsys):
    # defect: "--compiler ... (default: $POLYGEMM_COMPILER, else NVRTC when present, else nvcc)", while the compiler
    # module takes nvcc first where it is installed (README: "where a toolkit is installed its nvcc builds them")
    from polygemm.backends.cuda import compiler

    with pytest.raises(SystemExit):
        main(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    said = text[text.index("--compiler {nvrtc,nvcc} force one"):]
    said = said[said.index("default:"):said.index("--only")]
    order = sorted(compiler.COMPILERS, key=lambda c: said.lower().index(c))
    assert tuple(order) == compiler.COMPILERS, said
    for doc in (compiler.__doc__, sys.modules["polygemm.apps.compile"].__doc__):
        assert "NVRTC, else nvcc" not in doc and "NVRTC (else nvcc)" not in doc


# -- two dtypes: the hint follows numpy.matmul's promotion ---------------------------------------------------------------


@pytest.mark.parametrize("da_, db_, cast", [
    (np.float16, np.float32, "a.astype(np.float32)"),
    (np.float32, np.float16, "b.astype(np.float32)"),
    (np.float32, np.float64, "a.astype(np.float64)"),
    (BF16, np.float32, "a.astype(np.float32)"),
])
def test_operands_of_two_dtypes_are_told_to_cast_the_narrower_up(da_, db_, cast):
    # defect: "Cast one, e.g. b.astype(a.dtype)" whatever the dtypes: a float16 a beside a float32 b was told to round
    # b to float16 (values past 65504 become inf), where numpy.matmul computes the two in float32
    # the wider operand holds 70000, which the narrower dtype (float16, bfloat16's 8 bits) cannot hold as it is
    wide = np.result_type(da_, db_)
    a = np.full((2, 3), 70000.0 if da_ == wide else 1.0).astype(da_)
    b = np.full((3, 2), 70000.0 if db_ == wide else 1.0).astype(db_)
    with pytest.raises(DTypeError, match="must share one dtype") as info:
        pg.gemm(a, b, device="cpu")
    assert cast in str(info.value) and "astype(a.dtype)" not in str(info.value)
    # followed as written, the product is numpy.matmul's, dtype and value
    fixed = {"a": a, "b": b}
    name = cast[0]
    fixed[name] = eval(cast, {"np": np}, {"a": a, "b": b})
    want = np.matmul(a, b)
    got = pg.gemm(fixed["a"], fixed["b"], device="cpu")
    assert got.dtype == want.dtype and np.array_equal(got, want) and (got == 210000.0).all()


def test_bfloat16_beside_float16_is_told_a_cast_that_computes():
    # whatever NumPy and ml_dtypes promote these two to, the hint names a cast of both to float32,
    # which holds either exactly (a cast of bfloat16 to float16 overflows past 65504)
    a, b = np.ones((2, 3), np.float16), np.ones((3, 2), BF16)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, b, device="cpu")
    msg = str(info.value)
    assert "float16" in msg and "bfloat16" in msg
    assert "a.astype(np.float32)" in msg and "b.astype(np.float32)" in msg


def test_a_list_beside_an_array_of_another_dtype_keeps_the_arrays_dtype():
    a = np.ones((2, 3), np.float16)
    with pytest.raises(DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)"):  # the list is int64 to NumPy
        pg.gemm(a, [[1, 2], [3, 4], [5, 6]], device="cpu")
    with pytest.raises(DTypeError, match=r"np\.asarray\(a, dtype=np\.float32\)"):
        pg.gemm([[1.0, 2.0, 3.0]], np.ones((3, 2), np.float32), device="cpu")


def test_dask_operands_of_two_dtypes_are_told_to_cast_the_narrower_up():
    da = pytest.importorskip("dask.array")
    import polygemm.dask as pgd

    A, B = da.ones((4, 4), dtype=np.float16, chunks=2), da.ones((4, 4), dtype=np.float32, chunks=2)
    with pytest.raises(DTypeError, match=r"A and B must share one dtype.*A\.astype\(np\.float32\)") as info:
        pgd.gemm(A, B)
    assert "B.astype(A.dtype)" not in str(info.value)


# -- out and out_dtype of another dtype: the refusal says what to do -----------------------------------------------------


def test_an_out_of_a_castable_dtype_is_told_what_to_pass_and_how_to_cast_into_it():
    # numpy.matmul casts into a float64 out for float32 inputs; polygemm writes out in the result's dtype only.
    # defect: the refusal said "the result dtype must be float32; got out float64" and no way forward
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.full((2, 2), -1.0)
    with pytest.raises(DTypeError, match=r"the result dtype must be float32; got out float64: pass an out of float32, "
                                         r"or omit out and cast the result into yours \(out\[\.\.\.\] = result\)"):
        pg.gemm(a, a.T, out=out, device="cpu")
    assert (out == -1.0).all()  # untouched
    out[...] = pg.gemm(a, a.T, device="cpu")  # the way it names
    assert np.array_equal(out, np.matmul(a, a.T, out=np.empty((2, 2))))
    with pytest.raises(DTypeError, match=r"pass an out of float16 or float32"):
        pg.matmul(a.astype(np.float16), np.ones(3, np.float16), out=np.empty(2), device="cpu")


def test_an_out_dtype_the_inputs_do_not_give_is_told_to_cast_the_inputs():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(DTypeError, match=r"got out_dtype float64: omit out_dtype, or cast a and b to float64"):
        pg.gemm(a, a.T, out_dtype=np.float64, device="cpu")
    got = pg.gemm(a.astype(np.float64), a.T.astype(np.float64), device="cpu")  # the way it names
    assert got.dtype == np.float64 and (got == 3.0).all()


# -- polygemm.testing and polygemm.dask after "import polygemm" ----------------------------------------------------------


def test_testing_and_dask_are_attributes_after_import_polygemm():
    # defect: README's "API in brief" names polygemm.testing (error_bound, check_result); after "import polygemm"
    # it was an AttributeError, as polygemm.dask was, where numpy.testing is there after "import numpy".
    # Reaching them imports neither pycuda nor dask.
    # (The gemm call runs on cpu: on a machine with a GPU, auto would import pycuda for the cuda backend.)
    code = ("import sys, numpy as np, polygemm\n"
            "assert callable(polygemm.testing.check_result) and callable(polygemm.dask.gemm)\n"
            "assert 'dask' not in sys.modules and 'pycuda' not in sys.modules\n"
            "a = np.ones((3, 4), np.float32)\n"
            "assert polygemm.testing.check_result(polygemm.gemm(a, a.T, device='cpu'), a, a.T).ok\n"
            "assert {'testing', 'dask'} <= set(dir(polygemm))\n"
            "try:\n    polygemm.nosuch\nexcept AttributeError as e:\n    assert 'nosuch' in str(e)\n"
            "else:\n    raise SystemExit('no AttributeError')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# -- device="gpu" ---------------------------------------------------------------------------------------------------------


def test_device_gpu_is_told_the_gpu_backends_not_cpu(capsys):
    # defect: device="gpu" was "unknown device 'gpu' (did you mean 'cpu'?)": one letter from cpu, and the opposite
    # of what was asked for
    a = np.ones((2, 2), np.float32)
    for spelling in ("gpu", "GPU"):
        with pytest.raises(BackendUnavailableError, match=r"unknown device 'gpu' \(a GPU is 'cuda' \(NVIDIA\) or 'musa' "
                                                          r"\(Moore Threads\); `polygemm info` says which") as info:
            pg.gemm(a, a, device=spelling)
        assert "did you mean 'cpu'" not in str(info.value)
    assert main(["matrix", "--backends", "gpu", "--quick", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'gpu' (a GPU is 'cuda'" in err and "did you mean" not in err
    with pytest.raises(BackendUnavailableError, match=r"did you mean 'cpu'\?"):  # a typo is still a typo
        pg.gemm(a, a, device="cpux")


# -- edges checked that were right ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.complex128])
def test_int_bool_and_complex_inputs_are_dtype_errors_naming_a_conversion(dtype):
    # numpy.matmul computes these; polygemm computes floating dtypes only, and says how to convert (a TypeError too)
    a = np.ones((2, 3), dtype)
    for call in (pg.gemm, pg.matmul):
        with pytest.raises(DTypeError, match=rf"a has dtype {np.dtype(dtype).name}; polygemm supports .*"
                                             r"Convert it, e\.g\. a\.astype\(np\.float32\)") as info:
            call(a, a.T, device="cpu")
        assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("sa, sb", [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)), ((0,), (0,)), ((3,), (3, 0)),
                                    ((5, 0, 3), (3, 2)), ((0, 2, 3), (1, 3, 4))])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_zero_size_products_match_numpy_matmul(sa, sb, dtype):
    a, b = np.ones(sa, dtype), np.ones(sb, dtype)
    want, got = np.matmul(a, b), pg.matmul(a, b, device="cpu")
    assert isinstance(got, np.ndarray) and got.shape == np.shape(want) and got.dtype == want.dtype
    assert np.array_equal(got, want)


def test_half_inputs_with_a_float32_out_or_out_dtype_give_numpys_float32_product(rng):
    a, b = rng.standard_normal((4, 5)).astype(np.float16), rng.standard_normal((5, 3)).astype(np.float16)
    want = np.matmul(a, b, dtype=np.float32)
    out = np.empty((4, 3), np.float32)
    assert pg.matmul(a, b, out=out, device="cpu") is out
    got = pg.matmul(a, b, out_dtype=np.float32, device="cpu")
    assert got.dtype == np.float32 and np.allclose(got, want, rtol=1e-3) and np.allclose(out, want, rtol=1e-3)


def test_readme_cli_commands_on_a_machine_without_a_gpu(tmp_path, capsys, monkeypatch):
    """README commands: 'polygemm gemm --shape ... --check' passes, exit 0; the GPU-only ones name the device
    that is unavailable, exit 2, and write nothing."""
    info = {i.name: i for i in pg.backends()}["cuda"]
    if info.available:
        pytest.skip("the cuda backend is available here")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)
    assert main(["gemm", "--shape", "64x64x64", "--check"]) == 0
    assert "check: PASS" in capsys.readouterr().out
    for argv in (["bench", "--mode", "kernel", "--device", "cuda", "--dtype", "float32", "--variants", "all", "--shapes",
                  "square", "odd", "--json", "r.json", "--markdown", "r.md", "--plot", "r.png"],
                 ["ceiling"], ["gemm", "--shape", "64x64x64", "--device", "cuda"]):
        assert main(argv) == 2, argv
        assert "device 'cuda' is unavailable" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
