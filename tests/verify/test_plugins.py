"""verify= through the core for plugins: a plugin that keeps the contract passes; one that computes a
wrong product (alpha and beta forgotten) is caught, named."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg


def test_a_correct_plugin_passes_and_a_wrong_one_is_caught(doc_plugin, rng):
    a = rng.standard_normal((12, 9)).astype(np.float32)
    b = rng.standard_normal((9, 7)).astype(np.float32)
    got = pg.gemm(a, b, alpha=2.0, device="mydev", verify="raise")
    pg.testing.assert_close(got, a, b, None, 2.0)
    pg.gemm(a, b, device="fast", verify="raise")  # alpha 1 and no c: what it computes is right
    with pytest.raises(pg.VerificationError) as exc:
        pg.gemm(a, b, alpha=2.0, device="fast", verify="raise")
    assert "'fast'" in str(exc.value) and exc.value.report.failed == 12


def test_the_musa_backend_is_checked_on_the_host(musa, rng):
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 32)).astype(np.float16)
    got = pg.gemm(a, b, device="musa", verify="raise")
    assert got.shape == (40, 32)
    with pg.testing.inject_fault(5, 6, value=500.0):
        with pytest.raises(pg.VerificationError, match="'musa'"):
            pg.gemm(a, b, device="musa", verify="raise")
