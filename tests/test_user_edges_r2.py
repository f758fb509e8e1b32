"""Edges a NumPy user runs into on the CPU, second round: numpy.matmul's scalars and vectors
beside lists, and the command line's one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from conftest import usage_error


@pytest.mark.parametrize("a, b, name", [
    (np.array(2.0, np.float32), np.ones(3, np.float32), "a"),  # a 0-D array beside a vector
    (np.ones(3, np.float32), np.float32(2.0), "b"),  # a NumPy scalar beside a vector
    (2.0, np.ones(3, np.float32), "a"),  # a Python float
    (np.float32(2.0), np.float32(3.0), "a"),
    (np.ones((2, 3), np.float32), np.array(1.0, np.float32), "b"),
])
def test_matmul_refuses_scalars_as_numpy_does(a, b, name):
    """numpy.matmul raises ValueError for a 0-D operand; so does polygemm.matmul (a ShapeError
    naming it), not an IndexError or AttributeError from inside."""
    with pytest.raises(ValueError):
        np.matmul(a, b)
    with pytest.raises(pg.ShapeError, match=rf"^{name} is a scalar \(0-D"):
        pg.matmul(a, b, device="cpu")


@pytest.mark.parametrize("a, b, named", [
    (np.ones(3, np.float32), [[1.0, 2.0], [3.0, 4.0]], "a, a vector of 3"),
    ([[1.0, 2.0, 3.0]], np.ones(2), "b, a vector of 2"),
])
def test_matmul_vector_mismatch_beside_a_list(a, b, named):
    """A vector beside a list matrix of the wrong size is a ShapeError naming the vector (the
    message had read the list's .shape: AttributeError)."""
    with pytest.raises(pg.ShapeError, match=named):
        pg.matmul(a, b, device="cpu")




@pytest.mark.parametrize("argv, says", [
    (["gemm", "--shape", "-1x2x3"], "--shape: shape dimensions must be >= 0; got '-1x2x3'"),  # had read "expected one argument"
    (["gemm", "--shape", "2x2x2", "--seed", "-1"], "--seed: must be 0 or more; got '-1'"),  # had been numpy's traceback
    (["bench", "--device", "cpu", "--shapes", "8x8x8", "--max-dim", "0"], "--max-dim: must be an integer >= 1"),
    # had run one build at a time (--only names nothing: a regression fails at once, builds nothing)
    (["compile", "-j", "-1", "--only", "no_such_kernel"], "-j/--jobs: must be an integer >= 1; got '-1'"),
])
def test_cli_usage_errors_say_what_is_wrong(capsys, argv, says):
    assert says in usage_error(capsys, argv)


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_bench_settle_must_be_finite(capsys, monkeypatch, value):
    """--settle inf had settled the first kernel for ever (nan: silently not at all)."""
    from polygemm.apps import bench
    from polygemm.apps.cli import main

    def ran(*args, **kwargs):
        raise AssertionError(f"timed with settle={kwargs.get('settle')}")

    monkeypatch.setattr(bench, "run_bench", ran)  # a regression fails here instead of settling for ever

    with pytest.raises(SystemExit) as exc:  # a usage error (exit 2)
        main(["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--settle", value])
    assert exc.value.code == 2 and "--settle: must be >= 0 seconds and finite" in capsys.readouterr().err


def test_bench_max_dim_that_leaves_no_shape_is_an_error(capsys):
    from polygemm.apps.cli import main

    assert main(["bench", "--device", "cpu", "--shapes", "8x8x8", "--max-dim", "4"]) == 2
    assert "--max-dim 4 leaves out every shape" in capsys.readouterr().err


def test_gemm_command_out_of_memory_for_the_result_is_one_line(capsys, monkeypatch):
    """Operands that fit but a result that does not (100000x100000x1: 800 kB in, 40 GB out) end
    in the command's one-line error, exit 2 (it had been a MemoryError traceback)."""
    from polygemm.backends.cpu_ref import backend as cpu
    from polygemm.apps.cli import main

    def no_memory(self, plan, call):
        raise MemoryError("Unable to allocate 37.3 GiB for an array with shape (100000, 100000)")

    monkeypatch.setattr(cpu.CpuReferenceBackend, "execute", no_memory)  # as a machine without 40 GB answers
    assert main(["gemm", "--device", "cpu", "--shape", "100000x100000x1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith("polygemm: error: --shape 100000x100000x1:") and "GiB of host memory" in err


def test_a_fortran_ordered_stack_as_out_is_refused_with_what_would_do():
    """np.empty((3, 4, 2), order="F") interleaves its matrices; the refusal had said to "pass a C-
    or Fortran-ordered array", which the user had just done. It now names the matrices and
    a layout that is taken, and that layout works."""
    a, b = np.ones((3, 4, 5), np.float32), np.ones((5, 2), np.float32)
    out = np.full((3, 4, 2), 7.0, np.float32, order="F")
    with pytest.raises(pg.ArgumentError, match=r"its matrices \(the last two axes\) are neither row- nor column-major") as exc:
        pg.gemm(a, b, out=out, device="cpu")
    assert "pass a C- or Fortran-ordered array" not in str(exc.value)
    assert (out == 7.0).all()
    taken = np.empty((3, 2, 4), np.float32).swapaxes(-1, -2)  # the message's example
    assert pg.gemm(a, b, out=taken, device="cpu") is taken and (taken == 5.0).all()


@pytest.mark.parametrize("given, kind", [([[1, 2], [3, 4]], "list"), (((1, 0), (0, 1)), "tuple")])
def test_an_integer_list_is_told_how_a_list_converts(given, kind):
    """A list of Python ints reads as int64; the DTypeError had said to call a.astype(...), which
    a list does not have. It now says np.asarray(a, dtype=...) and how NumPy read the list."""
    with pytest.raises(pg.DTypeError, match=rf"np\.asarray\(a, dtype=np\.float32\) \(NumPy reads this {kind} as int64\)"):
        pg.gemm(given, np.eye(2), device="cpu")
    with pytest.raises(pg.DTypeError, match=r"a\.astype\(np\.float32\)"):  # an array is told its own astype
        pg.gemm(np.ones((2, 2), np.int64), np.eye(2), device="cpu")


def test_a_negative_plan_cache_size_warns_and_keeps_the_default():
    """POLYGEMM_PLAN_CACHE_SIZE=-3 had become a cache of bound -3 (plan_cache_info said so and
    nothing was kept), with no word; it now warns as an unreadable size does."""
    import os
    import subprocess
    import sys

    code = "import warnings; warnings.simplefilter('always')\nimport polygemm\nprint(polygemm.plan_cache_info()['maxsize'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "POLYGEMM_PLAN_CACHE_SIZE": "-3"})
    assert r.stdout.strip() == "256", r.stdout + r.stderr
    assert "POLYGEMM_PLAN_CACHE_SIZE='-3' is negative (0 turns the cache off); keeping 256 plans" in r.stderr


def test_plot_names_what_a_json_file_lacks(tmp_path, capsys):
    """``polygemm plot`` on JSON that is not a bench file says what it expected (it had printed
    only "'records'", a KeyError's text), one line, exit 2."""
    from polygemm.apps.cli import main

    bad = tmp_path / "other.json"
    bad.write_text('{"command": "x"}')
    assert main(["plot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "no 'records' list" in err and "polygemm bench --json" in err and "Traceback" not in err
    worse = tmp_path / "worse.json"
    worse.write_text('{"records": [1, 2]}')
    assert main(["plot", str(worse)]) == 2
    assert "not a list of objects" in capsys.readouterr().err


def test_matmul_of_int_lists_is_told_how_to_convert_a_list():
    """A list vector keeps the list's conversion hint (np.asarray(..., dtype=...)), as gemm
    gives it, not ``a.astype`` (a list has none); float lists still run as vectors."""
    import polygemm as pg
    from polygemm.errors import DTypeError

    with pytest.raises(DTypeError, match=r"np\.asarray\(a, dtype=np\.float32\)"):
        pg.matmul([1, 2], [3, 4], device="cpu")
    with pytest.raises(DTypeError, match=r"np\.asarray\(b, dtype=np\.float32\)"):
        pg.matmul(np.ones((2, 2), np.float32), (3, 4), device="cpu")
    got = pg.matmul([1.0, 2.0], [[3.0], [4.0]], device="cpu")
    assert got.shape == (1,) and got[0] == 11.0
    got = pg.matmul(np.ones((3, 2), np.float64), [1.0, 2.0], device="cpu")
    assert got.shape == (3,) and np.allclose(got, 3.0)
