"""A demanding user's edges, seventh round: bad option values of ``polygemm bench`` are usage errors
(exit 2, as argparse ends the CLI's others), ml_dtypes' real scalars of every kind as alpha and beta,
the refusal of an ``out`` whose matrices no kernel writes (what its strides do, what to pass), a
device index written otherwise than torch.device writes one (``"cpu:01"``); and, found on the way,
``--variants`` that names nothing (bench, matrix) or has spaces after its commas (bench), and
matmul's reversed vector ``out``. Each test failed before the fix it names."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polygemm as pg
from conftest import usage_error
from polygemm.apps.cli import main

ml_dtypes = pytest.importorskip("ml_dtypes")




# -- defect 1: bench's bad option values are usage errors (exit 2) -----------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_bench_settle_out_of_range_is_a_usage_error(capsys, monkeypatch, value):
    # defect 1: --settle -1 had ended in SystemExit("polygemm bench: ...") with status 1 (usage errors exit 2)
    from polygemm.apps import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("timed with a bad --settle"))
    last = usage_error(capsys, ["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--settle", value])
    assert last == f"polygemm bench: error: argument --settle: must be >= 0 seconds and finite; got {value!r}"


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bench_repeats_below_one_is_a_usage_error_like_a_word(capsys, value):
    # defect 1: --repeats 0 had been "polygemm: error: ..." after the parser, while --repeats many was argparse's
    last = usage_error(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", value])
    assert last == f"polygemm bench: error: argument --repeats: must be an integer >= 1 or auto; got {value!r}"


# -- defect 2: ml_dtypes' real scalars as alpha and beta ----------------------------------------------------------------


@pytest.mark.parametrize("kind, value", [
    ("float8_e4m3fn", 0.5), ("float8_e5m2", -2.0), ("float8_e4m3b11fnuz", 1.5),
    ("float8_e8m0fnu", 4.0), ("float4_e2m1fn", 1.5), ("float6_e2m3fn", -0.75), ("int4", -3), ("uint4", 7), ("int2", 1),
])
def test_ml_dtypes_real_scalars_are_alpha_and_beta(kind, value):
    # defect 2: bfloat16 was taken, every other real ml_dtypes scalar (float8, int4 ...) refused as "not a real number"
    t = getattr(ml_dtypes, kind, None)
    if t is None:
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {kind}")
    s = t(value)
    assert float(s) == value  # exact in that type
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    c = np.ones((2, 4), np.float32)
    want = value * (a @ b) + value * c
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=s, beta=s, device="cpu"), want)
    np.testing.assert_array_equal(pg.gemm(a, b, c, alpha=np.array(s), beta=np.array(s), device="cpu"), want)  # 0-D arrays


def test_ml_dtypes_complex_and_nan_scalars_are_still_refused():
    # defect 2: the acceptance stops at real values (a complex32 is no factor; a float8 NaN is not finite)
    a = np.ones((2, 2), np.float32)
    if hasattr(ml_dtypes, "complex32"):
        with pytest.raises(pg.ArgumentError, match=r"alpha must be a real number .*complex32"):
            pg.gemm(a, a, alpha=ml_dtypes.complex32(1), device="cpu")
    with pytest.raises(pg.ArgumentError, match="beta must be finite"):
        pg.gemm(a, a, a, beta=ml_dtypes.float8_e4m3fn(float("nan")), device="cpu")


# -- defect 3: an out whose matrices no kernel writes is told what its strides do ---------------------------------------


def test_a_column_strided_stack_as_out_is_told_its_last_axis_stride():
    # defect 3: out = np.empty((3, 2, 10))[..., ::2] had been told of "an N-D Fortran-ordered array"
    a, b = np.ones((3, 2, 4)), np.ones((4, 5))
    out = np.full((3, 2, 10), 7.0)[..., ::2]
    with pytest.raises(pg.ArgumentError) as info:
        pg.gemm(a, b, out=out, device="cpu")
    text = str(info.value)
    assert "Fortran" not in text
    assert "the last axis steps by 2 elements, the second-to-last by 10 elements" in text
    assert "np.empty((3, 2, 5), np.float64)" in text and "omit out" in text
    assert (out == 7.0).all()
    taken = np.empty((3, 2, 5))  # what the message says to pass
    assert pg.gemm(a, b, out=taken, device="cpu") is taken and (taken == 4.0).all()


@pytest.mark.parametrize("out, says", [
    (np.zeros((2, 10))[:, ::2], "the last axis steps by 2 elements, the second-to-last by 10 elements"),
    (np.zeros((2, 5))[:, ::-1], "the last axis steps by -1 element (reversed), the second-to-last by 5 elements"),
    (np.zeros((3, 2, 5))[:, ::-1], "the last axis steps by 1 element, the second-to-last by -5 elements (reversed)"),
    (np.zeros((3, 2, 5), order="F"), "the second-to-last by 3 elements (an N-D Fortran-ordered array interleaves its matrices)"),
])
def test_an_unwritable_out_is_told_what_its_strides_do(out, says):
    # defect 3: the refusal named no stride at fault (2-D: "pass a C- or Fortran-ordered array" only)
    a, b = np.ones(out.shape[:-1] + (4,)), np.ones((4, 5))
    with pytest.raises(pg.ArgumentError, match=r"its matrices \(the last two axes\) are neither row- nor column-major") as info:
        pg.gemm(a, b, out=out, device="cpu")
    assert says in str(info.value)


# -- defect 4: a device index written otherwise than torch.device writes one ---------------------------------------------


@pytest.mark.parametrize("device, like", [("cpu:01", "cpu:1"), ("cpu:00", "cpu:0"), ("CPU:01", "cpu:1"),
                                          ("cpu: 1", "cpu:1"), ("cpu:+1", "cpu:1"), ("cpu:-1", "cpu:0"),
                                          ("cuda:01", "cuda:1")])
def test_a_device_index_with_a_leading_zero_is_refused_saying_how_to_write_it(device, like):
    # defect 4: "cpu:01" had been read as device 1 and echoed as 'cpu:1' (and "cpu:00" run as cpu:0);
    # torch.device("cuda:01") is refused too
    a = np.ones((2, 2))
    for call in (pg.gemm, pg.explain):
        with pytest.raises(pg.ArgumentError, match=re.escape(f"e.g. {like!r}; got {device.partition(':')[2]!r}")) as info:
            call(a, a, device=device)
        assert "whole number >= 0 written in ASCII digits without a sign, spaces or leading zeros" in str(info.value)


def test_a_device_index_of_other_digits_is_no_crash_and_cpu_0_still_runs():
    # defect 4 (its kin): "cpu:²" had escaped as a bare ValueError from int(); "cpu:١" (an Arabic-Indic one) ran as cpu:1
    a = np.ones((2, 2))
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'cpu:²'"):
        pg.gemm(a, a, device="cpu:²")
    with pytest.raises(pg.ArgumentError, match="ASCII digits"):
        pg.gemm(a, a, device="cpu:\u0661")
    np.testing.assert_array_equal(pg.gemm(a, a, device="cpu:0"), a @ a)


def test_a_device_index_with_a_leading_zero_from_the_environment_says_so(monkeypatch):
    # defect 4: $POLYGEMM_DEVICE=cpu:01 had run cpu:1's refusal ('cpu:1'); the refusal names the variable
    monkeypatch.setenv("POLYGEMM_DEVICE", "cpu:01")
    with pytest.raises(pg.ArgumentError, match=r"e\.g\. 'cpu:1'; got '01' \(the device comes from \$POLYGEMM_DEVICE='cpu:01'"):
        pg.gemm(np.ones((2, 2)), np.ones((2, 2)))


@pytest.mark.parametrize("argv", [
    ["variants", "--device", "cuda:01"],  # cuda's table had been printed for it (exit 0) where cuda is unavailable
    ["variants", "--device", "cpu:01"],
    ["bench", "--device", "cpu:01", "--shapes", "8x8x8", "--repeats", "1"],
    ["gemm", "--shape", "4x4x4", "--device", "cpu:01"],
])
def test_the_cli_refuses_a_device_index_with_a_leading_zero(capsys, argv):
    # defect 4: the command line echoed 'cpu:1' (or printed cuda's table for cuda:01)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "a device index is a whole number >= 0" in err and "got '01'" in err and "Traceback" not in err


# -- found in this round ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--variants", ","],
    ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--mode", "kernel", "--variants", ""],
    ["matrix", "--backends", "cpu", "--quick", "--variants", ",", "--no-progress"],
])
def test_variants_that_name_nothing_are_a_usage_error(capsys, argv, tmp_path):
    # bench --variants , had timed nothing and exited 0 (an empty --json); matrix --variants , had run every variant
    js = tmp_path / "r.json"
    assert main(argv + (["--json", str(js)] if argv[0] == "bench" else [])) == 2
    captured = capsys.readouterr()
    assert "--variants" in captured.err and "names no variant" in captured.err
    assert not js.exists() and "cpu" not in captured.out


def test_bench_variants_take_spaces_after_commas(capsys):
    # "--variants 'blas, numpy'" had been refused: "' numpy' is not a float32 variant of cpu" (matrix took it)
    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", "1", "--variants", "blas, numpy",
                 "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "gemm(blas)" in out and "gemm(numpy)" in out


@pytest.mark.parametrize("a, b, out", [
    (np.ones(6), np.ones((6, 5)), np.empty(5)[::-1]),
    (np.ones((4, 6)), np.ones(6), np.empty(4)[::-1]),
    (np.ones((3, 4, 6)), np.ones(6), np.empty((3, 4))[:, ::-1]),
])
def test_matmul_reversed_vector_out_is_told_of_the_out_given(a, b, out):
    # the refusal had named the strides of the matrix view polygemm made of out ((-40, -8) for out.strides (-8,))
    with pytest.raises(pg.ArgumentError) as info:
        pg.matmul(a, b, out=out, device="cpu")
    text = str(info.value)
    assert text.startswith(f"out has strides {out.strides}: its last axis, the result's vector, steps by -8 bytes")
    assert f"np.empty({out.shape}, np.float64)" in text
    fresh = np.empty(out.shape)  # what the message says to pass
    np.testing.assert_array_equal(pg.matmul(a, b, out=fresh, device="cpu"), np.matmul(a, b))


class _CudaInterfaceOnly:
    """An object that offers only ``__cuda_array_interface__`` (no ndim, shape or reshape)."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (256, False), "version": 2, "strides": None}


def test_matmul_reads_the_dimensions_of_an_interface_only_device_array():
    # round 8 (GPU): matmul took an object offering only __cuda_array_interface__ for a scalar
    # ("a is a scalar (0-D ...)") where gemm takes it; its dimensions are the interface's
    with pytest.raises(pg.PolygemmError) as exc:
        pg.matmul(_CudaInterfaceOnly((4, 3)), _CudaInterfaceOnly((3, 5)), device="cpu")
    assert "scalar" not in str(exc.value), str(exc.value)
    with pytest.raises(pg.ShapeError, match=r"a is a vector \(1-D\) _CudaInterfaceOnly that polygemm cannot reshape"):
        pg.matmul(_CudaInterfaceOnly((3,)), _CudaInterfaceOnly((3, 5)), device="cpu")


class _UnreadableInterface:
    """A device array whose interface refuses to be read (as torch's does for a tensor that requires grad)."""

    @property
    def __cuda_array_interface__(self) -> dict:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. Use var.detach()")


def test_an_unreadable_device_interface_is_named_by_its_argument():
    # round 8 (GPU): a torch tensor that requires grad was refused as "could not read
    # __cuda_array_interface__ of Tensor: ...", without saying which operand it was
    for name, args in (("a", (_UnreadableInterface(), np.ones((2, 2), np.float32))),
                       ("b", (np.ones((2, 2), np.float32), _UnreadableInterface()))):
        with pytest.raises(pg.ArgumentError, match=rf"^{name} \(_UnreadableInterface\): could not read its "
                                                   rf"__cuda_array_interface__: .*detach"):
            pg.gemm(*args)


class _OnDevice:
    """An array on a plugin's device ("fakedev"), by ``__polygemm_array_interface__``."""

    def __init__(self, shape: tuple[int, ...], typestr: str) -> None:
        self.__polygemm_array_interface__ = {"shape": shape, "typestr": typestr, "strides": None, "data": (4096, False),
                                            "device": "fakedev", "version": 1}


def test_auto_refuses_a_dtype_its_devices_backend_lacks_as_a_dtype_error(monkeypatch):
    # round 8 (GPU): float64 CUDA arrays with device='auto' raised BackendUnavailableError (a
    # RuntimeError) though the device was there and only the dtype was refused (device='cuda' gives
    # a DTypeError, a TypeError); auto now says so as a DTypeError naming the dtypes it takes
    import dataclasses

    import polygemm.registry as registry
    from polygemm.backend import Availability, Backend
    from polygemm.problem import normalize

    class FakeDevice(Backend):
        name = "fakedev"
        residencies = ("fakedev",)

        def probe(self) -> Availability:
            return Availability(True)

        def variants(self):  # type: ignore[no-untyped-def]
            return [pg.Variant("k", ("float32",), "a kernel")]

        def plan(self, problem, variant="auto"):  # type: ignore[no-untyped-def]
            raise AssertionError("not planned")

        def run(self, plan):  # type: ignore[no-untyped-def]
            raise AssertionError("not run")

    info = registry.BackendInfo("fakedev", True, "", 50, "test", FakeDevice())
    monkeypatch.setattr(registry.discover, "backends", lambda wait=None: [info])
    problem = normalize(_OnDevice((4, 3), "<f8"), _OnDevice((3, 5), "<f8"))
    with pytest.raises(pg.DTypeError, match=r"no available backend computes float64 on fakedev data; it takes float32"):
        registry.select(problem, "auto")
    # data on a device no available backend takes: that is still an unavailable backend
    with pytest.raises(pg.BackendUnavailableError):
        registry.select(dataclasses.replace(problem, residency="elsewhere"), "auto")


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_ceiling_repeats_must_be_a_positive_integer(capsys, value):
    # left by round 7 (in the cuda backend's folder): `polygemm ceiling --repeats 0` (or a
    # negative count) was taken, and timed nothing
    line = usage_error(capsys, ["ceiling", "--repeats", value])
    assert "argument --repeats: must be an integer >= 1" in line, line


def test_a_device_batch_one_stride_cannot_walk_is_named_with_the_shape_to_make():
    # round 8 (GPU): a 4-D broadcast of device operands was refused with "pass a contiguous array"
    # though b was contiguous; an array polygemm does not copy (no CuPy, no torch) is now told the
    # shape it broadcasts to (gemm has CuPy and torch make theirs whole themselves)
    from polygemm.problem import NotWhole, normalize

    a, b = _OnDevice((2, 3, 4, 3), "<f4"), _OnDevice((3, 3, 5), "<f4")
    with pytest.raises(NotWhole, match=r"^b's batch \(3,\) .* broadcasts to \(2, 3\), which one stride cannot walk on the "
                                       r"device; .* pass b broadcast to \(2, 3, 3, 5\) and made contiguous") as exc:
        normalize(a, b)
    assert exc.value.name == "b" and exc.value.shape == (2, 3, 3, 5)
