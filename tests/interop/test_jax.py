"""JAX arrays on the cpu backend (where JAX is installed)."""

from __future__ import annotations

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import reference_for


jax = pytest.importorskip("jax")


jnp = pytest.importorskip("jax.numpy")


def _host(x, dtype=None):
    """``x`` as a JAX array on JAX's CPU device."""
    return jax.device_put(jnp.asarray(x, dtype=dtype), jax.devices("cpu")[0])


def test_jax_in_gives_jax_out_within_the_bound():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((33, 17)).astype(np.float32), rng.standard_normal((17, 9)).astype(np.float32)
    got = pg.gemm(_host(a), _host(b), device="cpu")
    assert type(got) is type(_host(a)) and got.dtype == jnp.float32
    assert reference_for(a, b).compare(np.asarray(got)).ok


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_jax_half_precision_and_out_dtype(dtype):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((20, 30)).astype(np.float32), rng.standard_normal((30, 11)).astype(np.float32)
    ja, jb = _host(a, dtype), _host(b, dtype)
    same = pg.gemm(ja, jb, device="cpu")
    wide = pg.gemm(ja, jb, out_dtype=jnp.float32, device="cpu")
    assert same.dtype == jnp.dtype(dtype) and wide.dtype == jnp.float32
    ha, hb = np.asarray(ja), np.asarray(jb)
    assert reference_for(ha, hb).compare(np.asarray(same)).ok
    assert reference_for(ha, hb, out_dtype=np.float32).compare(np.asarray(wide)).ok


def test_jax_batched_matmul_broadcasts():
    x = jnp.ones((3, 4, 5), jnp.float32)
    got = pg.matmul(x, jnp.ones((5, 6), jnp.float32))
    assert got.shape == (3, 4, 6) and float(got[2, 3, 5]) == 5.0
