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
