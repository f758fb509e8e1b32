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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_jax_out_is_refused_as_immutable_whatever_its_dtype(dtype):
    """A JAX array is immutable: an out of one is refused (gemm, explain, matmul's vector out) and left as it was,
    bfloat16 (read through NumPy's view of DLPack's older export, which has no read-only flag) as float32."""
    a, b = jnp.ones((3, 5), dtype), jnp.ones((5, 4), dtype)
    out = jnp.zeros((3, 4), dtype)
    same = out.reshape(-1)  # (another array of JAX's that may share out's buffer)
    for call in (lambda: pg.gemm(a, b, out=out), lambda: pg.explain(a, b, out=out)):
        with pytest.raises(pg.ArgumentError, match=r"out is a JAX array, which is immutable.*Omit out"):
            call()
    vector = jnp.zeros((3,), dtype)
    with pytest.raises(pg.ArgumentError, match=r"out is a JAX array, which is immutable"):
        pg.matmul(a, b[:, 0], out=vector)
    assert not np.asarray(out, np.float32).any() and not np.asarray(same, np.float32).any()
    assert not np.asarray(vector, np.float32).any()


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "int4"])
def test_a_jax_array_of_a_dtype_dlpack_cannot_carry_is_told_its_dtype(dtype):
    """JAX's float8 and int4 arrays are refused as NumPy arrays of those dtypes are (a DTypeError naming the dtype,
    the supported ones and a cast that keeps the values), not with DLPack's failure to export them."""
    a, b = jnp.ones((3, 5), dtype), jnp.ones((5, 4), dtype)
    for call in (lambda: pg.gemm(a, b), lambda: pg.explain(a, b), lambda: pg.matmul(a, b[:, 0])):
        with pytest.raises(pg.DTypeError, match=rf"a has dtype {dtype}; polygemm supports .*float32") as info:
            call()
        msg = str(info.value)
        assert "a.astype(np.float32)" in msg and "DLPack" not in msg, msg
        assert pg.gemm(a.astype(jnp.float32), b.astype(jnp.float32)).dtype == jnp.float32  # the cast named works


_ON_DEVICE_1 = """
import jax, jax.numpy as jnp, numpy as np, polygemm as pg
second = jax.devices()[1]
for dtype in ("float32", "bfloat16"):
    a = jax.device_put(jnp.ones((3, 5), dtype), second)
    b = jax.device_put(jnp.ones((5, 4), dtype), second)
    for got in (pg.gemm(a, b), pg.matmul(a, b[:, 0]), pg.gemm(a, b, out_dtype=jnp.float32)):
        assert got.devices() == {second}, (dtype, got.devices())
        assert float(np.asarray(got, np.float32).ravel()[0]) == 5.0
print("ok")
"""


def test_a_jax_result_lands_on_the_inputs_device():
    """Inputs on JAX's second CPU device give a result there, not on device 0 (where every CPU export lands)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
    run = subprocess.run([sys.executable, "-c", _ON_DEVICE_1], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]
