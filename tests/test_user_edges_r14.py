"""A demanding user's edges, fourteenth round (CPU): ``polygemm.dask.gemm`` with objects that are no
dask array, the device objects ``polygemm.gemm`` takes and operands of the other byte order; a
plugin written the way a third party would, whose ``plan()``, ``run()`` or variant table breaks the
contract (the caller must get an error naming the plugin, and never a wrong result or a corrupted
``out``); the command line's ``--json -``; and the musa backend's host flavor beside numpy.matmul.
The tests marked "defect" failed before the fix they name."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import polygemm as pg
from polygemm.cli import main
from polygemm.errors import ArgumentTypeError, DeviceError, DTypeError, UnsupportedProblemError
from polygemm.testing import reference_for, run_conformance
from test_device_objects import torch_device
from test_registry import install_fake_plugins

try:
    import dask.array as da
except ImportError:  # the other tests of this file run without dask
    da = None
import polygemm.dask as pgd  # noqa: E402  (imports no dask)

needs_dask = pytest.mark.skipif(da is None, reason="dask[array] not installed (pip install 'polygemm[dask]')")


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


# -- polygemm.dask.gemm -----------------------------------------------------------------------------------------------

@needs_dask
@pytest.mark.parametrize("given", [None, [[1.0, 2.0]], np.ones((2, 2)), "A"])
def test_dask_operand_that_is_no_dask_array_is_a_type_error(given):
    # defect: "A must be a dask array; got numpy.ndarray" was a ValueError only (ArgumentError), where
    # polygemm.gemm's a=None is a TypeError too (ArgumentTypeError): "except TypeError" missed it (polygemm/dask.py)
    B = da.ones((2, 3), chunks=1)
    with pytest.raises(TypeError) as info:
        pgd.gemm(given, B)
    assert isinstance(info.value, ArgumentTypeError) and isinstance(info.value, ValueError)  # still an ArgumentError
    assert str(info.value).startswith("A must be a dask array") and "dask.array.from_array(A" in str(info.value)
    with pytest.raises(ArgumentTypeError, match="^B must be a dask array"):
        pgd.gemm(da.ones((3, 2), chunks=1), given)


@needs_dask
def test_dask_takes_the_device_objects_polygemm_gemm_takes(rng):
    # defect: device=torch.device("cpu") (tensor.device) computed with polygemm.gemm but was refused by
    # polygemm.dask.gemm ("device must be a string"); now it is passed to the tasks by its name (polygemm/dask.py)
    a, b = rng.standard_normal((9, 6)), rng.standard_normal((6, 5))
    A, B = da.from_array(a, chunks=(4, 3)), da.from_array(b, chunks=(3, 2))
    R = pgd.gemm(A, B, device=torch_device("cpu"))
    assert R.name == pgd.gemm(A, B, device="cpu").name  # the same graph as the name gives
    assert_within(R.compute(), a, b)
    pgd.gemm(A, B, device=torch_device("cuda", 1))  # known backend: built lazily, whether it runs is the workers' to say
    with pytest.raises(TypeError, match=r"device must be a backend name .*torch\.device"):
        pgd.gemm(A, B, device=3)
    with pytest.raises(pg.BackendUnavailableError, match="unknown device 'jax'"):
        pgd.gemm(A, B, device=torch_device("jax"))


@needs_dask
def test_dask_operands_of_the_other_byte_order_are_the_same_dtype(rng):
    # defect: A '>f8' beside B '<f8' was "A and B must share one dtype; got A float64 and B float64", a '>f8'
    # c beside native operands "c's dtype=... non-native byte order", and two '>f8' operands made a graph whose
    # dtype '>f8' was not that of its blocks; polygemm.gemm takes each and writes native float64 (polygemm/dask.py)
    a, b, c = rng.standard_normal((7, 5)), rng.standard_normal((5, 4)), rng.standard_normal((7, 4))
    other = ">" if np.little_endian else "<"
    sa, sb, sc = (x.astype(x.dtype.newbyteorder(other)) for x in (a, b, c))
    for A, B in [(sa, b), (a, sb), (sa, sb)]:
        R = pgd.gemm(da.from_array(A, chunks=3), da.from_array(B, chunks=3), sc, alpha=2.0, beta=-1.0, device="cpu")
        assert R.dtype == np.dtype(np.float64) and R.dtype.isnative
        r = R.compute()
        assert r.dtype == R.dtype == pg.gemm(A, B, sc, alpha=2.0, beta=-1.0).dtype
        assert_within(r, a, b, c, 2.0, -1.0)
    with pytest.raises(DTypeError, match="share one dtype; got A float64 and B float32"):  # a real difference still is one
        pgd.gemm(da.from_array(sa, chunks=3), da.from_array(b.astype(np.float32), chunks=3))


@needs_dask
def test_dask_many_k_chunks_single_chunks_and_lazy_errors(rng):
    """Right: K in 40 chunks of 1..2 columns (40 calls folded in one task) stays within one call's bound;
    one chunk everywhere is one task; errors about arguments come at graph build, those of the device at
    compute()."""
    a, b = rng.standard_normal((6, 60)).astype(np.float32), rng.standard_normal((60, 5)).astype(np.float32)
    k_chunks = (1, 2) * 20
    R = pgd.gemm(da.from_array(a, chunks=((3, 3), k_chunks)), da.from_array(b, chunks=(k_chunks, (5,))), device="cpu")
    assert R.chunks == ((3, 3), (5,)) and R.dtype == np.float32
    assert_within(R.compute(), a, b)
    one = pgd.gemm(da.from_array(a, chunks=-1), da.from_array(b, chunks=-1), device="cpu")
    assert one.numblocks == (1, 1) and len([k for k in dict(one.__dask_graph__()) if k[0] == one.name]) == 1
    assert_within(one.compute(), a, b)
    with pytest.raises(UnsupportedProblemError, match="variant='nope' is not a variant of backend 'cpu'"):
        pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="cpu", variant="nope")
    lazy = pgd.gemm(da.from_array(a, chunks=3), da.from_array(b, chunks=3), device="musa")  # built: musa is known
    with pytest.raises(pg.PolygemmError):  # float32 on musa (or musa unavailable): said by compute()
        lazy.compute()


# -- quiet: warnings from these tests ---------------------------------------------------------------------------------

def test_no_rechunk_warning_where_k_chunks_agree(rng):
    """Right: aligned K chunks, c chunked like the result: no DaskRechunkWarning at all."""
    if da is None:
        pytest.skip("dask[array] not installed")
    a, b, c = rng.standard_normal((6, 8)), rng.standard_normal((8, 4)), rng.standard_normal((6, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        R = pgd.gemm(da.from_array(a, chunks=(3, 4)), da.from_array(b, chunks=(4, 2)), da.from_array(c, chunks=(3, 2)),
                     beta=1.0, device="cpu")
    assert_within(R.compute(), a, b, c, 1.0, 1.0)
