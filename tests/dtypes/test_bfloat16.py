"""bfloat16 without a GPU: NumPy's (ml_dtypes) and torch's, the reference rounded once, the bound."""

from __future__ import annotations

import json
import secrets

import ml_dtypes
import numpy as np
import pytest

import polygemm as pg
from polygemm import errors
from polygemm.backends.cpu_ref import reference
from polygemm.backends.cpu_ref.backend import round_once
from polygemm.errors import DTypeError
from polygemm.problem import SUPPORTED_DTYPES, normalize, parse_dtype
from polygemm.testing import (
    accumulation_dtype,
    check_result,
    error_bound,
    reference_for,
    run_conformance,
    unit_roundoff,
)

from tests.helpers import DLPackOnly


BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture
def rng():
    seed = secrets.randbits(32)
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(BF16)


VARIANTS = ["auto", "reference", "numpy"]


def rand_2(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def assert_within(got, a, b, c=None, alpha=1.0, beta=0.0, out_dtype=None):
    """``got`` element-wise within the bound of the float64 reference (shape and dtype too)."""
    res = reference_for(a, b, c, alpha, beta, out_dtype=out_dtype).compare(got)
    assert res.ok, res.message


ml_dtypes = pytest.importorskip("ml_dtypes")


def test_unit_roundoff_and_accumulation_type():
    assert "bfloat16" in SUPPORTED_DTYPES
    assert unit_roundoff(BF16) == 2.0**-8  # 8 significant bits
    assert unit_roundoff("bfloat16") == 2.0**-8
    assert accumulation_dtype(BF16) == np.float32


def test_bound_uses_bfloat16_output_roundoff(rng):
    a, b = rand(rng, 5, 7), rand(rng, 7, 3)
    ref = reference(a, b, dtype=np.float64)
    tol16 = error_bound(a, b, out_dtype=BF16, ref=ref)
    tol32 = error_bound(a, b, out_dtype=np.float32, ref=ref)
    k_term = error_bound(a, b, out_dtype=np.float32, ref=np.zeros_like(ref)) - float(np.finfo(np.float32).tiny)  # no output term
    # the output term is u_out * |ref|: bfloat16's is 2**16 times float32's
    np.testing.assert_allclose(tol16 - k_term - float(ml_dtypes.finfo(BF16).tiny), 2.0**-8 * np.abs(ref), rtol=1e-6)
    assert np.all(tol16 > tol32)


def test_round_once_is_correct_where_two_roundings_are_not():
    # 1 + 2**-8 is halfway between the bfloat16 neighbours 1 and 1 + 2**-7 (a tie: to even, 1);
    # anything above it rounds up. 1 + 2**-8 + 2**-30 rounds to float32 as the tie itself,
    # so float64 -> float32 -> bfloat16 gives 1: one rounding gives 1 + 2**-7.
    x = np.array([1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-8, -(1 + 2.0**-8 + 2.0**-30), 1 + 3 * 2.0**-8])
    got = round_once(x, BF16).astype(np.float64)
    assert list(got) == [1 + 2.0**-7, 1.0, -(1 + 2.0**-7), 1 + 2 * 2.0**-7]
    assert x.astype(np.float32).astype(BF16).astype(np.float64)[0] == 1.0  # the double rounding
    special = round_once(np.array([np.inf, -np.inf, np.nan, 0.0, 1e39, -1e39, 1e-45]), BF16).astype(np.float64)
    assert np.isposinf(special[0]) and np.isneginf(special[1]) and np.isnan(special[2]) and special[3] == 0
    assert np.isposinf(special[4]) and np.isneginf(special[5])  # beyond bfloat16's range (and float32's)


def test_round_once_is_nearest_on_random_values(rng):
    x = rng.standard_normal(20000) * 10.0 ** rng.integers(-30, 30, 20000)
    r = round_once(x, BF16)
    bits = r.view(np.uint16)
    up = (bits + 1).astype(np.uint16).view(BF16).astype(np.float64)
    down = (bits - 1).astype(np.uint16).view(BF16).astype(np.float64)
    err = np.abs(x - r.astype(np.float64))
    assert np.all(err <= np.abs(x - up)) and np.all(err <= np.abs(x - down))


def test_reference_accumulates_in_float64_and_rounds_once(rng):
    a, b, c = rand(rng, 9, 300), rand(rng, 300, 4), rand(rng, 9, 4)
    exact = a.astype(np.float64) @ b.astype(np.float64) * 0.5 - 1.25 * c.astype(np.float64)
    got = reference(a, b, c, 0.5, -1.25)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.view(np.uint16), round_once(exact, BF16).view(np.uint16))
    assert reference(a, b, dtype=np.float32).dtype == np.float32


def test_a_bfloat16_accumulator_fails_the_bound(rng):
    """Summing in bfloat16 is far outside the bound (that is what the bound is for)."""
    k = 2048
    a, b = np.abs(rand(rng, 8, k)) + 1, np.abs(rand(rng, k, 8)) + 1
    acc = np.zeros((8, 8), BF16)
    for i in range(k):  # a bfloat16 accumulator: every partial sum rounded to 8 bits
        acc = (acc.astype(np.float32) + np.outer(a[:, i].astype(np.float32), b[i].astype(np.float32))).astype(BF16)
    res = check_result(acc, a, b)
    assert not res.ok and res.violations > 0
    assert check_result(reference(a, b), a, b).ok


@pytest.mark.parametrize("variant", ["auto", "blas", "reference", "numpy"])
@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
def test_numpy_bfloat16_in_and_out(rng, variant, orders):
    m, n, k = 17, 65, 1000
    a = np.asarray(rand(rng, m, k), order=orders[0])
    b = np.asarray(rand(rng, k, n), order=orders[1])
    got = pg.gemm(a, b, device="cpu", variant=variant)
    assert isinstance(got, np.ndarray) and got.dtype == BF16 and got.shape == (m, n)
    assert reference_for(a, b).compare(got).ok
    wide = pg.gemm(a, b, device="cpu", variant=variant, out_dtype=np.float32)
    assert wide.dtype == np.float32
    res = reference_for(a, b, out_dtype=np.float32).compare(wide)
    assert res.ok, res.message


@pytest.mark.parametrize("out_dtype", [BF16, np.float32], ids=["bf16", "f32"])
def test_alpha_beta_c_and_out_in_place(rng, out_dtype):
    a, b = rand(rng, 33, 45), rand(rng, 45, 19)
    c = rng.standard_normal((33, 19)).astype(out_dtype)
    c0 = c.copy()
    got = pg.gemm(a, b, c, alpha=-1.5, beta=0.75, out=c, device="cpu")
    assert got is c
    res = reference_for(a, b, c0, -1.5, 0.75, out_dtype=out_dtype).compare(c)
    assert res.ok, res.message


def test_batched_bfloat16(rng):
    a, b = rand(rng, 3, 17, 65), rand(rng, 65, 1)
    got = pg.gemm(a, b, device="cpu")
    assert got.shape == (3, 17, 1) and got.dtype == BF16
    for i in range(3):
        assert reference_for(a[i], b).compare(got[i]).ok


def test_out_dtype_spellings():
    assert parse_dtype("out_dtype", "bfloat16") == BF16
    assert parse_dtype("out_dtype", ml_dtypes.bfloat16) == BF16
    a = np.ones((2, 3), BF16)
    p = normalize(a, a.T, out_dtype="float32")
    assert p.dtype == BF16 and p.out_dtype == np.float32


def test_dtype_errors_name_bfloat16_and_what_is_accepted():
    a = np.ones((4, 5), BF16)
    with pytest.raises(errors.DTypeError, match=r"result dtype must be bfloat16 \(or float32: bfloat16 products accumulate in float32"):
        pg.gemm(a, a.T, out_dtype=np.float16)
    with pytest.raises(errors.DTypeError, match="one dtype"):
        pg.gemm(a, np.ones((5, 4), np.float16))
    with pytest.raises(errors.DTypeError, match=r"c must have the dtype of the result \(float32\); got bfloat16"):
        pg.gemm(a, a.T, np.ones((4, 4), BF16), beta=1.0, out_dtype=np.float32)
    with pytest.raises(errors.DTypeError, match="bfloat16"):
        pg.gemm(np.ones((2, 2), ml_dtypes.float8_e4m3fn), np.ones((2, 2), ml_dtypes.float8_e4m3fn))


def test_explain_names_the_dtype(rng):
    a = rand(rng, 8, 8)
    plan = pg.explain(a, a, device="cpu")
    assert "bfloat16 -> bfloat16" in str(plan)
    assert "bfloat16 -> float32" in str(pg.explain(a, a, device="cpu", out_dtype="float32"))


def test_torch_bfloat16_cpu_tensors_in_torch_out(rng):
    torch = pytest.importorskip("torch")
    a, b = rand(rng, 17, 65), rand(rng, 65, 33)
    ta = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    tb = torch.from_numpy(b.view(np.int16)).view(torch.bfloat16).t().contiguous().t()  # column-major
    got = pg.gemm(ta, tb, device="cpu")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16 and tuple(got.shape) == (17, 33)
    res = reference_for(a, b).compare(got.view(torch.int16).numpy().view(BF16))
    assert res.ok, res.message
    wide = pg.gemm(ta, tb, device="cpu", out_dtype=torch.float32)
    assert isinstance(wide, torch.Tensor) and wide.dtype == torch.float32
    assert reference_for(a, b, out_dtype=np.float32).compare(wide.numpy()).ok


def test_dlpack_only_bfloat16_host_data_is_read_in_place(rng):
    torch = pytest.importorskip("torch")


    a = rand(rng, 6, 5)
    t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    p = normalize(DLPackOnly(t), DLPackOnly(t.t()))
    assert p.dtype == BF16 and p.a.ptr == t.data_ptr() and not p.a.copied  # no copy
    assert (p.a.layout, p.b.layout) == ("row", "col")


def test_conformance_suite_runs_bfloat16_on_cpu():
    results = run_conformance("cpu", dtypes=["bfloat16"], quick=True)
    ran = [r for r in results if r.status != "skip"]
    assert ran and all(r.dtype == "bfloat16" for r in results)
    assert {r.variant for r in ran} == {"blas", "reference", "numpy"}
    fails = [r for r in results if r.status == "fail"]
    assert not fails, fails[:3]


def test_matrix_cli_has_bfloat16_rows(capsys):
    from polygemm.apps.cli import main

    rc = main(["matrix", "--backends", "cpu", "--dtypes", "bfloat16", "--quick", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = [line for line in out.splitlines() if line.startswith("cpu ")]
    assert len(rows) == 3 and all("bfloat16" in r and "FAIL" not in r for r in rows)


@pytest.mark.parametrize("mode", ["kernel", "call"])
def test_bench_records_name_bfloat16(tmp_path, mode):
    from polygemm.apps.cli import main

    path = tmp_path / "bf16.json"
    rc = main(["bench", "--device", "cpu", "--dtype", "bfloat16", "--mode", mode, "--shapes", "32x48x40", "--repeats", "2",
               "--json", str(path), "--no-progress"])
    assert rc in (0, None)
    recs = json.loads(path.read_text())["records"]
    assert recs and all(r["dtype"] == "bfloat16" for r in recs)


def test_musa_refuses_bfloat16_naming_what_it_accepts():
    from polygemm.backends.musa import MusaBackend
    from polygemm.backends.musa.arrays import host_f16

    a = np.ones((4, 4), BF16)
    with pytest.raises(errors.DTypeError, match=r"does not support dtype bfloat16; it supports float16"):
        MusaBackend().check_problem(normalize(a, a))
    with pytest.raises(errors.DTypeError, match=r"must be float16 .*got bfloat16"):
        host_f16(a, "a", "the musa backend")


def test_cuda_tensor_core_rungs_compute_bfloat16():
    from polygemm.backends.cuda.variants import kernel_specs, variant_table

    specs = kernel_specs()
    for name in ("hgemm_v1_mma_ldmatrix", "hgemm_v2_wgmma_tma", "hgemm_v3_wgmma_pingpong"):
        spec = specs[name]
        assert spec.dtypes == ("float16", "bfloat16"), name
        builds = spec.builds()
        half = [b for b in builds if "PG_BF16" not in b]
        bf16 = [b for b in builds if b.get("PG_BF16") == 1]
        assert len(half) == len(bf16) and [{**b, "PG_BF16": 1} for b in half] == bf16  # every fp16 build, again
        v = next(v for v in variant_table() if v.name == name)
        assert "bfloat16" in v.dtypes and v.out_dtypes == ("float32",)
    assert "bfloat16" in next(v for v in variant_table() if v.name == "cublas").dtypes
    assert all("bfloat16" not in s.dtypes for s in specs.values() if s.dtype == "float32")


def test_cuda_plans_the_bf16_build_and_every_such_build_is_compiled():
    from polygemm.backends.cuda.planning import Mat, plan_launch
    from polygemm.backends.cuda.variants import kernel_specs

    def h(name, r, c, ld, ptr=0, size=2):
        return Mat(name, r, c, "row", ld, ptr, size)

    specs = kernel_specs()
    v1 = specs["hgemm_v1_mma_ldmatrix"]
    cases = [
        (v1, h("a", 1000, 1000, 1000), h("b", 1000, 65, 65), h("c", 1000, 65, 65, 0, 4), (0, 0, 0, 0)),  # ld 65: unaligned, fp32 C
        (v1, h("a", 4095, 17, 17), h("b", 17, 260, 260), h("c", 4095, 260, 260), (0, 0, 0, 0)),  # row split
        (v1, h("a", 64, 64, 64), h("b", 64, 64, 64), h("c", 64, 64, 64), (3, 4096, 0, 4096)),  # batch
        (specs["hgemm_v2_wgmma_tma"], h("a", 512, 512, 512), h("b", 512, 512, 512), h("c", 512, 512, 512, 0, 4), (0, 0, 0, 0)),
        (specs["hgemm_v3_wgmma_pingpong"], h("a", 64, 64, 64), h("b", 64, 64, 64), h("c", 64, 64, 64), (2, 4096, 4096, 4096)),
    ]
    seen_split = False
    for spec, a, b, c, batch in cases:
        lp = plan_launch(spec, a, b, c, batch=batch, dtype="bfloat16")
        macros = lp.macros()
        assert macros["PG_BF16"] == 1 and macros in spec.builds(), (spec.name, macros)
        assert lp.out_f32 == (c.itemsize == 4)
        seen_split |= bool(lp.row_split)
        fp16 = plan_launch(spec, a, b, c, batch=batch)
        assert "PG_BF16" not in fp16.macros() and fp16.macros() in spec.builds()
    assert seen_split
    assert plan_launch(None, h("a", 8, 8, 8), h("b", 8, 8, 8), h("c", 8, 8, 8), dtype="bfloat16").dtype == "bfloat16"


def test_compile_jobs_include_the_bf16_builds():
    from polygemm.apps.compile import jobs

    names = {(j.name, dict(j.macros).get("PG_BF16", 0)) for j in jobs([80, 90])}
    for rung in ("hgemm_v1_mma_ldmatrix", "hgemm_v2_wgmma_tma", "hgemm_v3_wgmma_pingpong"):
        assert (rung, 1) in names and (rung, 0) in names
    assert not any(bf for name, bf in names if name.startswith(("cm_", "rm_")))


def test_cuda_auto_for_bfloat16_uses_the_fp16_measurements():
    from polygemm.backends.cuda.catalog import auto_specs, choose_auto_variant

    assert {s.name for s in auto_specs("bfloat16", 90)} <= {s.name for s in auto_specs("float16", 90)}
    assert all("bfloat16" in s.dtypes for s in auto_specs("bfloat16", 90))
    for shape in [(4096, 4096, 4096), (1000, 3000, 2000), (512, 512, 16384), (1, 1, 1)]:
        name, why = choose_auto_variant(*shape, "bfloat16", sm=90)
        fp16 = choose_auto_variant(*shape, "float16", sm=90)[0]
        # the same rung where it has a bf16 build (the skinny rungs have none)
        assert name == fp16 or "skinny" in fp16, (shape, name, fp16)
        assert "bfloat16 is not tuned yet: float16's measurements choose" in why
    assert choose_auto_variant(4096, 4096, 4096, "bfloat16", sm=80)[0] == "hgemm_v1_mma_ldmatrix"


def test_cuda_backend_plans_bfloat16_without_a_device(rng):
    from polygemm.backends.cuda.backend import CudaBackend

    a = rand(rng, 1000, 17)
    plan = CudaBackend().plan(normalize(a, rand(rng, 17, 65)), "auto")
    assert plan.problem.dtype == BF16
    from polygemm.backends.cuda.variants import kernel_specs

    # whichever rung the tables choose, one built for bfloat16
    assert "bfloat16" in plan.reason and "bfloat16" in kernel_specs()[plan.variant.split(":")[0]].dtypes


def test_tensor_maps_say_bfloat16():
    from polygemm.backends.cuda.tma import TENSOR_MAP_DTYPES

    assert TENSOR_MAP_DTYPES == {"float16": 6, "float32": 7, "bfloat16": 9}  # CUtensorMapDataType (cuda.h)


def test_cublas_bf16_type_code():
    from polygemm.backends.cuda import cublas

    assert (cublas.CUDA_R_16F, cublas.CUDA_R_16BF, cublas.CUDA_R_32F) == (2, 14, 0)  # cudaDataType (library_types.h)


def test_alpha_and_beta_may_be_bfloat16_scalars():
    """ml_dtypes' bfloat16 scalars are real numbers too (they are no np.floating)."""
    import ml_dtypes

    a = np.ones((3, 4), np.float32)
    c = np.ones((3, 3), np.float32)
    got = pg.gemm(a, a.T, c, alpha=ml_dtypes.bfloat16(0.5), beta=ml_dtypes.bfloat16(2.0), device="cpu")
    np.testing.assert_allclose(got, np.full((3, 3), 4.0))


@pytest.mark.parametrize("variant", VARIANTS)
def test_bfloat16_batches_with_bfloat16_scalars_and_c_of_either_dtype(rng, variant):
    a, b = rand_2(rng, (3, 8, 40), BF16), rand_2(rng, (1, 40, 6), BF16)
    alpha, beta = ml_dtypes.bfloat16(-1.5), ml_dtypes.bfloat16(0.25)
    c = rand_2(rng, (3, 8, 6), BF16)
    got = pg.gemm(a, b, c, alpha=alpha, beta=beta, device="cpu", variant=variant)
    assert got.dtype == BF16
    assert_within(got, a, b, c, -1.5, 0.25)
    c32 = rand_2(rng, (3, 8, 6))
    got = pg.gemm(a, b, c32, alpha=alpha, beta=beta, out_dtype=np.float32, device="cpu", variant=variant)
    assert got.dtype == np.float32
    assert_within(got, a, b, c32, -1.5, 0.25, out_dtype=np.float32)
    c0 = c32.copy()  # in place into a float32 c
    assert pg.gemm(a, b, c32, alpha=alpha, beta=beta, out=c32, device="cpu", variant=variant) is c32
    assert_within(c32, a, b, c0, -1.5, 0.25, out_dtype=np.float32)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("out_dtype", [None, np.float32], ids=["bf16", "f32"])
def test_bfloat16_nan_and_inf_propagate_per_matrix(rng, variant, out_dtype):
    """NaN and Inf reach exactly the elements numpy.matmul's float64 product has them in, in the
    matrix of the batch they belong to; a bfloat16 overflow is inf as IEEE rounds it."""
    a, b = rand_2(rng, (3, 4, 6), BF16), rand_2(rng, (3, 6, 5), BF16)
    a[0, 1, 2] = np.nan
    b[1, 3, 4] = np.inf
    a[2, 2, :] = 3e38  # finite in bfloat16; its row's sums are not (b's matrix positive: no cancellation, every
    b[2] = np.abs(b[2].astype(np.float32)) + 0.5  # partial sum of float32 accumulation overflows the same way)
    got = pg.gemm(a, b, device="cpu", variant=variant, out_dtype=out_dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    g = got.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    assert np.isinf(g[1, :, 4]).all() and np.isinf(g[2, 2]).all()
    assert_within(got, a, b, out_dtype=out_dtype)


@pytest.mark.parametrize("variant", VARIANTS)
def test_bfloat16_k_zero_is_beta_c_or_zeros(rng, variant):
    a, b = rand_2(rng, (3, 4, 0), BF16), rand_2(rng, (3, 0, 2), BF16)
    zero = pg.gemm(a, b, device="cpu", variant=variant)
    assert zero.dtype == BF16 and zero.shape == (3, 4, 2) and not zero.astype(np.float32).any()
    c = rand_2(rng, (3, 4, 2), BF16)
    got = pg.gemm(a, b, c, beta=ml_dtypes.bfloat16(0.5), device="cpu", variant=variant)
    np.testing.assert_array_equal(got.astype(np.float32), c.astype(np.float32) * 0.5)  # exact: a power of two
    c32 = rand_2(rng, (3, 4, 2))
    got = pg.gemm(a, b, c32, beta=3.0, out_dtype=np.float32, device="cpu", variant=variant)
    np.testing.assert_array_equal(got, c32 * np.float32(3.0))
    nan_c = np.full((3, 4, 2), np.nan, BF16)  # beta = 0: c is not read
    assert not pg.gemm(a, b, nan_c, beta=0.0, device="cpu", variant=variant).astype(np.float32).any()
    assert pg.matmul(a, b, device="cpu").shape == (3, 4, 2)


def test_bfloat16_beside_float16_is_told_a_cast_that_computes():
    # whatever NumPy and ml_dtypes promote these two to, the hint names a cast of both to float32,
    # which holds either exactly (a cast of bfloat16 to float16 overflows past 65504)
    a, b = np.ones((2, 3), np.float16), np.ones((3, 2), BF16)
    with pytest.raises(DTypeError) as info:
        pg.gemm(a, b, device="cpu")
    msg = str(info.value)
    assert "float16" in msg and "bfloat16" in msg
    assert "a.astype(np.float32)" in msg and "b.astype(np.float32)" in msg


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float64)], ids=["bfloat16", "float64"])
def test_bfloat16_and_float64_numpy_arrays_through_every_api(rng, dtype):
    """gemm (every cpu variant, c and beta, out), matmul with vectors, explain and polygemm.testing take
    ml_dtypes.bfloat16 and float64 arrays as they take float32 ones; bfloat16 also stores a float32 result."""
    a = rng.standard_normal((5, 7)).astype(dtype)
    b = rng.standard_normal((7, 3)).astype(dtype)
    c = rng.standard_normal((5, 3)).astype(dtype)
    for variant in ("auto", "blas", "reference", "numpy"):
        got = pg.gemm(a, b, c, alpha=0.5, beta=-2.0, device="cpu", variant=variant)
        assert got.dtype == dtype and check_result(got, a, b, c, 0.5, -2.0).ok, variant
    out = np.empty((5, 3), dtype)
    assert pg.gemm(a, b, out=out, device="cpu") is out and check_result(out, a, b).ok
    v = pg.matmul(a[0], b, device="cpu")
    assert v.shape == (3,) and v.dtype == dtype and check_result(v[None], a[:1], b).ok
    s = pg.matmul(a[0], b[:, 0], device="cpu")
    assert s.shape == () and s.dtype == dtype
    plan = pg.explain(a, b, device="cpu")
    assert plan.problem.dtype == dtype and plan.problem.out_dtype == dtype and plan.backend == "cpu"
    tol = error_bound(a, b)
    u = unit_roundoff(dtype)
    assert tol.shape == (5, 3) and u == (2.0 ** -8 if dtype == BF16 else 2.0 ** -53)
    if dtype == BF16:
        wide = pg.gemm(a, b, out_dtype=np.float32, device="cpu")
        assert wide.dtype == np.float32 and check_result(wide, a, b, out_dtype=np.float32).ok
        assert "expected bfloat16" in check_result(wide, a, b).message


@pytest.mark.parametrize("first, second", [(np.float16, BF16), (BF16, np.float16)], ids=["f16-bf16", "bf16-f16"])
def test_bfloat16_beside_float16_is_told_the_cast_that_loses_nothing(first, second):
    # NumPy promotes bfloat16 with float16 to no dtype; torch and JAX promote the two to float32, which holds both
    # exactly, so the hint names that cast: "b.astype(np.float16)" would turn bfloat16 values past 65504 into inf (and
    # float16 into bfloat16's 8 bits)
    a = np.full((2, 3), 70000.0 if first == BF16 else 1.0).astype(first)
    b = np.full((3, 2), 70000.0 if second == BF16 else 1.0).astype(second)
    for call in (lambda: pg.gemm(a, b, device="cpu"), lambda: pg.gemm(a, b, out_dtype=np.float32, device="cpu")):
        with pytest.raises(DTypeError) as info:
            call()
        msg = str(info.value)
        assert "a.astype(np.float32)" in msg and "b.astype(np.float32)" in msg
    got = pg.gemm(a.astype(np.float32), b.astype(np.float32), device="cpu")  # the way it names first
    held = float(np.array(70000.0).astype(BF16))  # 70144: bfloat16's nearest, kept exactly by float32
    assert got.dtype == np.float32 and (got == 3 * held).all()
    if first == np.float16:  # the cast of b to float16: the bfloat16 operand overflows
        with np.errstate(over="ignore"):
            assert np.isinf(pg.gemm(a, b.astype(np.float16), device="cpu")).all()


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "int4", "float4_e2m1fn"])
def test_ml_dtypes_narrow_types_are_refused_by_name(rng, name):
    t = np.dtype(getattr(ml_dtypes, name))
    x = rng.standard_normal((3, 3)).astype(t)
    with pytest.raises(DTypeError, match=f"a has dtype {name}.*a.astype\\(np.float32\\)"):
        pg.gemm(x, x, device="cpu")
    y = np.eye(3, dtype=np.float32)
    with pytest.raises(DTypeError, match=f"{name} is no dtype polygemm computes"):
        pg.gemm(y, y, out_dtype=t, device="cpu")


@pytest.mark.parametrize("kind, value", [
    ("float8_e4m3fn", 0.5), ("float8_e5m2", -2.0), ("float8_e4m3b11fnuz", 1.5),
    ("float8_e8m0fnu", 4.0), ("float4_e2m1fn", 1.5), ("float6_e2m3fn", -0.75), ("int4", -3), ("uint4", 7), ("int2", 1),
])
def test_ml_dtypes_real_scalars_are_alpha_and_beta(kind, value):
    # every real ml_dtypes scalar (bfloat16, float8, int4 ...) is a real number to alpha and beta
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
    # the acceptance stops at real values (a complex32 is no factor; a float8 NaN is not finite)
    a = np.ones((2, 2), np.float32)
    if hasattr(ml_dtypes, "complex32"):
        with pytest.raises(pg.ArgumentError, match=r"alpha must be a real number .*complex32"):
            pg.gemm(a, a, alpha=ml_dtypes.complex32(1), device="cpu")
    with pytest.raises(pg.ArgumentError, match="beta must be finite"):
        pg.gemm(a, a, a, beta=ml_dtypes.float8_e4m3fn(float("nan")), device="cpu")
