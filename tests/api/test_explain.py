"""``explain`` and ``last_plan``: the plan a call would run and the one it ran."""

from __future__ import annotations


import numpy as np
import pytest

import polygemm
import polygemm as pg
import polygemm.api as api
from polygemm.backends.cuda import cost
from polygemm.backends.cuda.planning import Mat, pitch_off
from polygemm.backends.cuda.variants import kernel_specs
from polygemm.errors import ArgumentError, PolygemmError
from polygemm.problem import Call, normalize
from polygemm.testing import check_result


COL32 = "hgemm_v2_wgmma_tma_64x32_col"


SPECS = kernel_specs()


def _rand(rng: np.random.Generator, dtype: np.dtype, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def _same(e: pg.Plan, got: pg.Plan) -> None:
    assert (e.backend, e.variant, e.device, e.copies, e.layouts, e.padding) == \
        (got.backend, got.variant, got.device, got.copies, got.layouts, got.padding)
    assert (e.problem.alpha, e.problem.beta, e.problem.in_place, e.problem.out_dtype) == \
        (got.problem.alpha, got.problem.beta, got.problem.in_place, got.problem.out_dtype)


def _ones(*shape, dtype=np.float32):
    return np.ones(shape, dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(20)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32)


def _call(a, b, c=None, out=None, alpha=1.0, beta=0.0):
    return Call(a, b, c, out, 0, 0, 0, 0, alpha, beta, None)


class _Plugin(pg.Backend):
    """A plugin as docs/plugins.md describes one: plan and run, the default execute."""

    name = "r4a_plugin"

    def probe(self):
        return pg.Availability(True)

    def variants(self):
        return (pg.Variant("ref", ("float32",), "numpy"),)

    def plan(self, problem, variant="auto"):
        return pg.Plan(self.name, "ref", "test", problem)

    def run(self, plan):
        p = plan.problem
        return np.matmul(p.a.array, p.b.array) * p.alpha


def test_explain_of_gemm_with_c_says_beta_one(rng):
    a, b, c = np.ones((2, 3)), np.ones((3, 4)), np.ones((2, 4))
    assert pg.explain(a, b, c, device="cpu").problem.beta == 1.0
    assert pg.explain(a, b, device="cpu").problem.beta == 0.0
    assert pg.explain(a, b, c, beta=0.5, device="cpu").problem.beta == 0.5


@pytest.mark.parametrize("sa, sb", [((4,), (4, 3)), ((2, 4), (4,)), ((4,), (4,)), ((5, 2, 4), (4,))])
def test_explain_takes_what_matmul_takes(sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    plan = pg.explain(a, b, device="cpu")
    assert plan.backend == "cpu"
    assert any("vector" in note and "matmul" in note for note in plan.notes)
    assert pg.matmul(a, b, device="cpu").shape == np.matmul(a, b).shape


def test_explain_of_a_scalar_is_still_refused():
    with pytest.raises(pg.ShapeError, match="scalar"):
        pg.explain(np.float32(2.0), np.ones((2, 2), np.float32))


def test_the_plan_weighs_no_col_row_for_a_thin_n_but_runs_it_when_named():
    from polygemm.backends.cuda.backend import CudaBackend
    from polygemm.problem import normalize

    p = normalize(np.zeros((8192, 8192), np.float16), np.zeros((8192, 8), np.float16))
    plan = CudaBackend().plan(p)
    assert plan.variant.partition(":")[0] != COL32 and not any(COL32 in name for name, _ in plan.candidates), str(plan)
    named = CudaBackend().plan(p, variant=COL32)
    assert named.variant == COL32 and named.launch["kernel problem"] == "8x8192x8192", str(named)
    named = CudaBackend().plan(p, variant=COL32 + ":split_k=2")
    assert named.variant == COL32 + ":split_k=2", str(named)


@pytest.mark.parametrize("n,off", [(2000, False), (1000, True)])
def test_a_measurement_anchors_at_its_own_time_less_only_the_pitch_cost_the_plan_adds(n, off):
    """A TMA rung measured at 4096 x n x 4096 (compact rows: 4000 bytes on a sector, 2000 off
    one): rank's estimate there takes out exactly what pitch_penalty_us charges the same rows
    (none for 4000-byte rows), so the plan's estimate with the penalty added is the measurement."""
    spec = SPECS["hgemm_v2_wgmma_tma_128x128"]
    records = [{"variant": spec.name, "dtype": "float16", "m": 4096, "n": n, "k": 4096, "tflops": 300.0, "vendor_tflops": 400.0},
               {"variant": spec.name, "dtype": "float16", "m": 8192, "n": 8192, "k": 8192, "tflops": 500.0, "vendor_tflops": 600.0}]
    (cand,) = [c for c in cost.rank([spec], records, 4096, n, 4096, split_ok=False)]
    measured = 2.0 * 4096 * n * 4096 / 300e6
    a, b = Mat("a", 4096, 4096, "row", 4096, 0, 2), Mat("b", 4096, n, "row", n, 0, 2)
    assert pitch_off(b) is off and not pitch_off(a)
    penalty = cost.pitch_penalty_us(spec, 4096, n, 4096, pitch_off(a), pitch_off(b))
    assert (penalty > 0) is off
    assert cand.estimate_us + penalty == pytest.approx(measured)


@pytest.mark.parametrize("case", ["plain", "strided", "fortran", "c-beta", "out", "in-place", "variant", "out_dtype"])
def test_explain_matches_what_gemm_ran(rng, case):
    pg.clear_plan_cache()
    a, b, c = _rand(rng, np.float32, 6, 4), _rand(rng, np.float32, 4, 5), _rand(rng, np.float32, 6, 5)
    kw: dict = {}
    if case == "strided":
        a = _rand(rng, np.float32, 12, 8)[::2, ::2]
    elif case == "fortran":
        a = np.asfortranarray(a)
    elif case == "c-beta":
        kw = dict(c=c, alpha=0.5, beta=-1.5)
    elif case == "out":
        kw = dict(out=np.full((6, 5), np.nan, np.float32))
    elif case == "in-place":
        cc = c.copy()
        kw = dict(c=cc, beta=2.0, out=cc)
    elif case == "variant":
        kw = dict(variant="reference")
    elif case == "out_dtype":
        a, b = a.astype(np.float16), b.astype(np.float16)
        kw = dict(out_dtype=np.float32)
    e = pg.explain(a, b, **kw)
    assert e.cached is False
    got = pg.gemm(a, b, **kw)
    lp = pg.last_plan()
    assert lp.cached is True  # explain cached it
    _same(e, lp)
    if case == "strided":
        assert any("a copied once" in x for x in lp.copies)
    if case == "in-place":
        assert lp.problem.in_place and "in place: out is c" in str(lp)
        assert check_result(got, a, b, c, 1.0, 2.0).ok
    elif case == "c-beta":
        assert check_result(got, a, b, c, 0.5, -1.5).ok
    else:
        assert check_result(got, a, b, out_dtype=kw.get("out_dtype")).ok
    if "out" in kw:
        assert got is kw["out"]


def test_last_plan_and_explain_say_this_calls_alpha_and_beta(rng):
    # a call that reuses a cached plan is described with its own alpha and beta, not those of the call that made the
    # plan (gemm(alpha=3) after gemm(alpha=2) shows alpha=3 in last_plan() and explain())
    pg.clear_plan_cache()
    a, b, c = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5), _rand(rng, np.float32, 4, 5)
    pg.gemm(a, b, c, alpha=2.0, beta=0.5)
    got = pg.gemm(a, b, c, alpha=3.0, beta=-0.25)
    lp = pg.last_plan()
    assert lp.cached and (lp.problem.alpha, lp.problem.beta) == (3.0, -0.25)
    assert "alpha=3, beta=-0.25" in str(lp).splitlines()[0]
    assert check_result(got, a, b, c, 3.0, -0.25).ok
    e = pg.explain(a, b, c, alpha=0.125, beta=4.0)
    assert e.cached and (e.problem.alpha, e.problem.beta) == (0.125, 4.0)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (3.0, -0.25)  # explain ran nothing
    pg.gemm(a, b, c, alpha=2.0, beta=0.5)
    assert (pg.last_plan().problem.alpha, pg.last_plan().problem.beta) == (2.0, 0.5)  # the cache's own plan kept its own


@pytest.mark.parametrize("mode", ["raise", "retry"])
def test_last_plan_is_not_a_product_that_failed_its_check(rng, mode):
    from polygemm.testing import inject_fault

    pg.gemm(np.ones((2, 2)), np.ones((2, 2)), device="cpu")
    a, b = _rand(rng, np.float32, 6, 5), _rand(rng, np.float32, 5, 4)
    with inject_fault(1, 2, value=1e3, times=2):  # (retry: the second product corrupted too)
        with pytest.raises(pg.VerificationError):
            pg.gemm(a, b, device="cpu", verify=mode)
    lp = pg.last_plan()
    assert (lp.problem.m, lp.problem.dtype) == (2, np.float64)


def test_last_plan_is_not_a_failed_call(rng):
    a, b = _rand(rng, np.float32, 4, 3), _rand(rng, np.float32, 3, 5)
    pg.gemm(a, b)
    before = pg.last_plan()
    out = np.full((4, 5), np.nan, np.float32)
    for bad in (lambda: pg.gemm(a, a), lambda: pg.gemm(a, b, out=a), lambda: pg.gemm(a, b, beta=1.0),
                lambda: pg.gemm(a, b, device="nosuch"), lambda: pg.gemm(a, b, variant="nosuch"),
                lambda: pg.gemm(a.astype(np.int32), b), lambda: pg.explain(a.astype(np.float64), b.astype(np.float64))):
        try:
            bad()
        except (ValueError, TypeError, RuntimeError):
            pass
        lp = pg.last_plan()
        assert (lp.problem.m, lp.problem.n, lp.problem.k, lp.problem.dtype, lp.problem.out) == (4, 5, 3, np.float32, None)
        assert (lp.backend, lp.variant) == (before.backend, before.variant)
    assert np.isnan(out).all()


def test_last_plan_of_matmul_describes_the_product_it_ran(rng):
    a, x = _rand(rng, np.float32, 5, 3), _rand(rng, np.float32, 3)
    got = pg.matmul(a, x)
    lp = pg.last_plan()
    assert got.shape == (5,) and (lp.problem.m, lp.problem.n, lp.problem.k) == (5, 1, 3)  # the column x became
    assert check_result(got[:, None], a, x[:, None]).ok
    out = np.full(5, np.nan, np.float32)
    assert pg.matmul(a, x, out=out) is out and pg.last_plan().problem.out is not None
    assert check_result(out[:, None], a, x[:, None]).ok


def test_a_long_run_of_shapes_evicts_the_least_recently_used_plan_and_counts_every_call():
    """past the bound the plan least recently *used* goes (a hit renews a plan), the size stays at the bound,
    hits + misses is the number of calls, and clear_plan_cache() then the same call plans again, then hits."""
    pg.clear_plan_cache()
    bound = pg.plan_cache_info()["maxsize"]
    assert bound == api.plan_cache.PLAN_CACHE_SIZE and bound > 2
    b = _ones(2, 3)
    calls = 0
    for m in range(1, bound + 1):  # fills the cache exactly
        pg.gemm(_ones(m, 2), b, device="cpu")
        calls += 1
    pg.gemm(_ones(1, 2), b, device="cpu")  # the oldest, used again: now the most recent
    calls += 1
    assert pg.last_plan().cached
    for m in range(bound + 1, bound + 41):  # 40 new shapes push out 40 plans
        pg.gemm(_ones(m, 2), b, device="cpu")
        calls += 1
    info = pg.plan_cache_info()
    assert info["size"] == bound and info["hits"] + info["misses"] == calls and info["hits"] == 1
    pg.gemm(_ones(1, 2), b, device="cpu")  # renewed before the 40: kept
    assert pg.last_plan().cached
    pg.gemm(_ones(2, 2), b, device="cpu")  # the least recently used then: gone
    assert not pg.last_plan().cached
    assert pg.plan_cache_info()["size"] == bound
    pg.clear_plan_cache()
    assert pg.plan_cache_info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": bound}
    got = pg.gemm(_ones(7, 2), b, device="cpu")
    assert not pg.last_plan().cached and (got == 2.0).all()
    pg.gemm(_ones(7, 2), b, device="cpu")
    assert pg.last_plan().cached and pg.plan_cache_info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": bound}


def test_last_plan_after_a_failed_call_is_the_last_completed_call():
    """Docstring: "the plan of the last gemm call completed in this thread": a refused call, an explain and a call on
    an unknown device leave it as it was; the next completed call replaces it."""
    pg.gemm(_ones(2, 3), _ones(3, 4), device="cpu")
    before = pg.last_plan()
    for fails in (lambda: pg.gemm(_ones(2, 3), _ones(2, 3), device="cpu"),
                  lambda: pg.gemm(_ones(2, 3), _ones(3, 4), device="nosuch"),
                  lambda: pg.gemm(_ones(2, 3), _ones(3, 4), out=np.empty((2, 4)), device="cpu")):
        with pytest.raises(PolygemmError):
            fails()
        assert pg.last_plan().problem.shape_str() == before.problem.shape_str() == "2x4x3"
    pg.explain(_ones(5, 6), _ones(6, 7), device="cpu")  # plans, runs nothing
    assert pg.last_plan().problem.shape_str() == "2x4x3"
    pg.gemm(_ones(5, 6), _ones(6, 7), device="cpu")
    assert pg.last_plan().problem.shape_str() == "5x7x6"


def test_an_in_place_update_through_views_of_one_block_reuses_its_plan(rng):
    """A blocked loop's ``gemm(a, b, C[i:j], beta=1, out=C[i:j])`` passes two view objects of one memory: the key says
    "in place", and the host overlap check binds a view of c's own memory to the cached plan (last_plan().cached
    True, as plan_cache_info() counts a hit); one that only overlaps c is still refused, and one at c's pointer
    with other strides is not bound to it."""
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    C = rng.standard_normal((12, 6)).astype(np.float32)
    want = C.astype(np.float64)
    pg.clear_plan_cache()
    for i in range(0, 12, 4):
        for _ in range(2):
            res = pg.gemm(a, b, C[i:i + 4], beta=1.0, out=C[i:i + 4], device="cpu")
            want[i:i + 4] += a.astype(np.float64) @ b
            plan = pg.last_plan()
            assert plan is not None and plan.problem.in_place and "in place: out is c" in str(plan)
            assert plan.cached == (i > 0 or _ > 0)
            assert np.shares_memory(res, C)
    info = pg.plan_cache_info()
    assert (info["hits"], info["misses"], info["size"]) == (5, 1, 1)
    np.testing.assert_allclose(C, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match="out partly overlaps c"):
        pg.gemm(a, b, C[0:4], beta=1.0, out=C[1:5], device="cpu")
    sq = rng.standard_normal((6, 6)).astype(np.float32)
    a6 = rng.standard_normal((6, 5)).astype(np.float32)
    with pytest.raises(ArgumentError, match="out partly overlaps c"):
        pg.gemm(a6, b, sq, beta=1.0, out=sq.T, device="cpu")  # same pointer, the other memory order: not in place
    assert pg.plan_cache_info()["hits"] == 5


def test_device_auto_does_not_pile_its_passed_over_list_onto_a_kept_plan(plugins, rng):
    # each new cache key (device=None, "auto", the plugin's name, alpha != 1) passes the same backends over: explain()
    # lists each of them once, not again for every key
    a, b = f32(rng, 5, 3), f32(rng, 3, 4)
    assert pg.explain(a, b).backend == "keepsplans"
    plans = [pg.explain(a, b, device=d, alpha=s) for d in (None, "auto", "AUTO") for s in (1.0, 2.0, 0.5)]
    for p in plans:
        assert len(p.candidates) == len({name for name, _ in p.candidates}), p.candidates
    be = pg.get_backend("keepsplans")
    for kept in be.kept.values():
        assert kept.candidates == [] and kept.copies == [], kept  # the plugin's own object, as it made it


def test_explain_describes_a_host_copy_without_making_it(monkeypatch):
    """explain "runs nothing": a strided view's C-order copy (64 MB for a[:, ::2] of a 4000 x 8000 float32, cached
    plan or not) is described in plan.copies and not made; gemm still makes it."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((40, 80)).astype(np.float32)[:, ::2]
    b = rng.standard_normal((40, 9)).astype(np.float32)

    def no_copy(*args, **kwargs):
        raise AssertionError("explain made a copy")

    with monkeypatch.context() as m:
        m.setattr(np, "ascontiguousarray", no_copy)
        first = polygemm.explain(a, b, device="cpu")
        again = polygemm.explain(a, b, device="cpu")  # from the plan cache
    assert any("a copied once into C order" in s for s in first.copies) and again.cached
    got = polygemm.gemm(a, b, device="cpu")  # the cached plan's copy is made by the call that runs
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_explain_of_a_broadcast_too_large_to_copy_returns_its_plan():
    """A 100000 x 100000 broadcast of one row (37 GB as a copy): explain describes the copy without a MemoryError."""
    a = np.broadcast_to(np.ones(100000, np.float32), (100000, 100000))
    plan = polygemm.explain(a, np.ones((100000, 2), np.float32), device="cpu")
    assert plan.backend == "cpu" and any(s.startswith("a copied") for s in plan.copies)


def test_changing_a_returned_plan_changes_nothing_polygemm_runs(rng, without_gpu):
    # last_plan() is a copy: setting its variant changes nothing later calls run, and explain()'s copy shares no list
    # with the cache (a note appended to it shows in no later plan)
    a, b = _operands(rng)
    pg.clear_plan_cache()
    pg.gemm(a, b)
    mine = pg.last_plan()
    mine.variant, mine.private = "reference", False
    mine.notes.append("the user's note")
    explained = pg.explain(a, b)
    explained.candidates.clear()
    explained.layouts.clear()
    pg.gemm(a, b)
    again = pg.last_plan()
    assert again.variant == "blas" and "the user's note" not in again.notes
    assert again.candidates and again.layouts
    assert pg.explain(a, b).candidates == again.candidates


def test_a_plan_from_explain_cannot_be_run_and_says_so(rng):
    # a plan from explain() carries no operands: backend.run() of it is refused saying so, not an AttributeError on
    # the missing operand
    a, b = _operands(rng)
    plan = pg.explain(a, b, device="cpu")
    with pytest.raises(ArgumentError, match=r"holds no operands.*polygemm\.gemm"):
        pg.get_backend(plan.backend).run(plan)
    pg.gemm(a, b, device="cpu")
    with pytest.raises(ArgumentError, match="holds no operands"):
        pg.get_backend("cpu").run(pg.last_plan())


@pytest.mark.parametrize("backend", [pg.get_backend("cpu"), _Plugin()], ids=["cpu", "plugin"])
def test_execute_refuses_operands_that_are_not_those_of_the_plan(rng, backend):
    # Backend.execute(plan, Call(...)) checks the operands against the plan: a K of 4 under a plan for K = 5, float64
    # operands under a float32 plan, or a plan with c and beta = 1 run without c would otherwise compute a wrong
    # result silently
    a, b = _operands(rng)
    plan = backend.plan(normalize(a, b))
    np.testing.assert_allclose(backend.execute(plan, _call(a, b)), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(ArgumentError, match=r"a .*\(4, 4\).*plan.*\(4, 5\)"):
        backend.execute(plan, _call(a[:, :4], b[:4]))
    with pytest.raises(ArgumentError, match="a .*float64.*plan.*float32"):
        backend.execute(plan, _call(a.astype(np.float64), b.astype(np.float64)))
    with pytest.raises(ArgumentError, match="b .*plan"):
        backend.execute(plan, _call(a, np.asfortranarray(b)[:, :2]))
    with pytest.raises(ArgumentError, match="b has strides .*plan"):  # the same shape, column-major
        backend.execute(plan, _call(a, np.asfortranarray(b)))
    with pytest.raises(ArgumentError, match="passes c, but its plan has no c"):
        backend.execute(plan, _call(a, b, c=a @ b, beta=1.0))
    with pytest.raises(ArgumentError, match="alpha"):
        backend.execute(backend.plan(normalize(a, b, out=np.empty((4, 3), np.float32))),
                        _call(a, b, out=np.empty((4, 3), np.float32), alpha=2.0))


def test_execute_refuses_a_call_missing_what_the_plan_has(rng):
    a, b = _operands(rng)
    cpu = pg.get_backend("cpu")
    c = rng.standard_normal((4, 3)).astype(np.float32)
    plan = cpu.plan(normalize(a, b, c, beta=1.0))
    with pytest.raises(ArgumentError, match="lacks c, but its plan has c"):
        cpu.execute(plan, _call(a, b, beta=1.0))
    out = np.full((4, 3), 7.0, np.float32)
    plan = cpu.plan(normalize(a, b, out=out))
    with pytest.raises(ArgumentError, match="out .*plan"):
        cpu.execute(plan, _call(a, b, out=np.full((4, 4), 7.0, np.float32)))
    with pytest.raises(ArgumentError, match="out .*plan"):
        cpu.execute(plan, _call(a, b, out=np.full((4, 3), 7.0, np.float32)[:, ::-1]))


def test_a_plan_from_the_cache_equals_the_plan_it_was_made_as(rng):
    """Whether a plan came from the cache is not part of what it runs: the first explain (made) and the second
    (cached) compare equal; a plan for another shape does not."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    pg.clear_plan_cache()
    made, cached = pg.explain(a, b, device="cpu"), pg.explain(a, b, device="cpu")
    assert not made.cached and cached.cached
    assert made == cached
    assert made != pg.explain(a, b[:, :4], device="cpu") and made != pg.explain(a, b, alpha=2.0, device="cpu")
    # a plan cached by a call on other arrays of the same shape: the same plan (the addresses are no part of it)
    pg.clear_plan_cache()
    pg.gemm(a.copy(), b.copy(), device="cpu")
    assert pg.explain(a, b, device="cpu") == made
    swapped = a.astype(">f4"), b.astype(">f4")  # read through a copy of its own each time
    assert pg.explain(*swapped, device="cpu") == pg.explain(*swapped, device="cpu")


def test_explain_refuses_a_bad_verify_first_as_gemm_does():
    a, b = np.ones((4, 5), np.float32), np.ones((5, 3), np.float32)
    for x, y in ((a, a), (a, b)):  # a shape error, and a precision error, besides the bad mode
        for call in (pg.explain, pg.gemm):
            with pytest.raises(pg.ArgumentError, match=r"verify='maybe' is not a verification mode"):
                call(x, y, verify="maybe", precision="bogus")
