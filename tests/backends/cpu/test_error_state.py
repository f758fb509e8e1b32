"""The cpu backend's products are quiet whatever np.seterr says: the error state it sets per product."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest

import polygemm as pg
from polygemm.backends.cpu_ref import backend as cpu_backend


@pytest.mark.parametrize("out", [False, True])
def test_an_overflowing_product_is_quiet_and_leaves_the_users_error_state(out):
    big = np.full((2, 2), np.finfo(np.float32).max, np.float32)
    target = np.empty((2, 2), np.float32) if out else None
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):  # planned, then cached
            got = pg.gemm(big, big, out=target, device="cpu", variant="numpy")
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
    assert np.isposinf(got).all()


def test_the_quiet_state_is_made_once_or_left_to_errstate_where_numpy_has_none(monkeypatch):
    state = cpu_backend._quiet_state()
    assert state is not None or not hasattr(np, "_core")  # NumPy 2: its context variable
    monkeypatch.setitem(sys.modules, "numpy._core._multiarray_umath", types.ModuleType("stand_in"))  # names gone
    assert cpu_backend._quiet_state() is None


def test_where_numpy_has_no_such_state_the_products_are_quiet_through_errstate():
    # NumPy without the context variable (1.x, or other internals): the backend's import takes
    # np.errstate instead, and an overflowing product is still quiet under np.errstate(all="raise")
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import sys, types, warnings
        import numpy as np
        real = sys.modules["numpy._core._multiarray_umath"]
        sys.modules["numpy._core._multiarray_umath"] = types.ModuleType("stand_in")
        import polygemm as pg
        from polygemm.backends.cpu_ref import backend as cpu_backend
        sys.modules["numpy._core._multiarray_umath"] = real
        assert cpu_backend._QUIET is None
        big = np.full((2, 2), np.finfo(np.float32).max, np.float32)
        with np.errstate(all="raise"), warnings.catch_warnings():
            warnings.simplefilter("error")
            for out in (None, np.empty((2, 2), np.float32), None):
                got = pg.gemm(big, big, out=out, device="cpu", variant="numpy")
            assert np.geterr()["over"] == "raise"
        assert np.isposinf(got).all()
        print("OK")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
