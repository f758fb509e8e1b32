"""The conformance suite runs variants named with a modifier, ``rung:split_k=N`` (cuda's split
over K), by that name: they had passed the name check (which reads the rung before the colon)
and then matched no row of the backend's table, so run_conformance returned no row for them and
a CI asserting "no failure" passed having run nothing. The GPU runs cannot happen here; a host
plugin that splits K, and cuda's static table, stand in."""

from __future__ import annotations

import numpy as np
import pytest

from polygemm import registry
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts, store_result
from polygemm.apps.cli import main
from polygemm.errors import ArgumentError, UnsupportedProblemError
from polygemm.testing import run_conformance
from polygemm.testing.conformance import iter_cases, modified_variants


class Splitting(Backend):
    """A host plugin whose one rung also runs as ``tiled:split_k=N``: K in N slices, summed in order."""

    name = "splitting"
    priority = 300

    def __init__(self) -> None:
        super().__init__()
        self.planned: list[str] = []

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("tiled", ("float32", "float64"), "a rung with a split-K build"),
                Variant("plain", ("float32",), "a rung without one"))

    def get_variant(self, name):
        base, _, rest = name.partition(":split_k=")
        if rest:
            if base != "tiled":
                raise UnsupportedProblemError(f"variant={name!r}: {base} cannot split K (no batched build)")
            if not rest.isdigit() or int(rest) < 2:
                raise UnsupportedProblemError(f"variant={name!r}: split_k must be an integer of at least 2")
            name = base
        return super().get_variant(name)

    def plan(self, problem, variant="auto"):
        self.planned.append(variant)
        chosen = self.get_variant("tiled" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        return Plan(self.name, variant, "test", problem, layouts=host_layouts(problem))

    def run(self, plan):
        p = plan.problem
        splits = int(plan.variant.partition(":split_k=")[2] or 1)
        a, b = p.a.array.astype(np.float64), p.b.array.astype(np.float64)
        with np.errstate(all="ignore"):
            edges = np.linspace(0, p.k, splits + 1).astype(int)
            res = np.zeros((p.m, p.n))
            for lo, hi in zip(edges[:-1], edges[1:]):  # slice order: deterministic
                res = res + a[:, lo:hi] @ b[lo:hi, :]
            res = p.alpha * res
            if p.c is not None and p.beta != 0.0:
                res = res + p.beta * p.c.array.astype(np.float64)  # beta * a float32 array is float32 (NumPy 2)
        return store_result(res.astype(p.dtype), None if p.out is None else p.out.array)


def test_a_split_variant_runs_every_case_under_its_own_name():
    be = Splitting()
    rows = run_conformance(be, variants=["tiled:split_k=3"], quick=True)
    assert {(r.dtype, r.variant) for r in rows} == {("float32", "tiled:split_k=3"), ("float64", "tiled:split_k=3")}
    assert len(rows) == len(list(iter_cases(be, variants=["tiled"], quick=True)))  # the whole grid, as the rung's
    bad = [(r.group, r.case, r.detail) for r in rows if r.status != "pass" and r.group != "device"]
    assert not bad, bad
    assert set(be.planned) == {"tiled:split_k=3"}  # the backend was asked for the split, not the rung


def test_a_rung_and_its_splits_run_side_by_side_in_table_order():
    be = Splitting()
    rows = run_conformance(be, dtypes="float64", variants="tiled:split_k=4, plain, tiled, tiled:split_k=2, tiled:split_k=4",
                           groups="shapes", quick=True)
    order = list(dict.fromkeys(r.variant for r in rows))
    assert order == ["tiled", "tiled:split_k=4", "tiled:split_k=2"]  # plain computes no float64; the repeat runs once
    assert all(r.status == "pass" and r.dtype == "float64" for r in rows), rows


@pytest.mark.parametrize("name, says", [
    ("tiled:split_k=1", "split_k must be an integer of at least 2"),
    ("plain:split_k=2", "plain cannot split K"),
])
def test_a_split_the_backend_refuses_is_an_error_in_its_words_not_a_skip(name, says):
    with pytest.raises(ArgumentError) as exc:
        run_conformance(Splitting(), variants=[name], quick=True)
    assert f"variants names {name!r}, which backend 'splitting' does not run: " in str(exc.value) and says in str(exc.value)


def test_cpu_refuses_a_split_of_its_own_variant():
    with pytest.raises(ArgumentError, match="which backend 'cpu' does not run: variant='blas:split_k=2' is not a variant"):
        run_conformance("cpu", variants=["blas:split_k=2"], quick=True)
    assert main(["matrix", "--backends", "cpu", "--quick", "--no-progress", "--variants", "blas:split_k=2"]) == 2


def test_cuda_split_variants_are_listed_and_run_or_skipped_with_the_reason(capsys):
    cuda = registry.get_backend("cuda")
    listed = {(d, v) for d, v, *_ in iter_cases(cuda, variants=["cm_v12_cp_async:split_k=4", "hgemm_v1_mma_ldmatrix:split_k=2"],
                                                 quick=True)}
    assert listed == {("float32", "cm_v12_cp_async:split_k=4"), ("float16", "hgemm_v1_mma_ldmatrix:split_k=2"),
                      ("bfloat16", "hgemm_v1_mma_ldmatrix:split_k=2")}
    rows = run_conformance("cuda", variants=["cm_v12_cp_async:split_k=4"], quick=True)
    if not _available("cuda"):
        assert [(r.dtype, r.variant, r.status) for r in rows] == [("float32", "cm_v12_cp_async:split_k=4", "skip")]
        assert rows[0].detail.startswith("backend unavailable: ")
    else:  # on a GPU: the whole grid under the split's name
        assert rows and {r.variant for r in rows} == {"cm_v12_cp_async:split_k=4"}
        assert not [r for r in rows if r.status == "fail"], [r for r in rows if r.status == "fail"]
    # a variant of another backend still selects nothing; polygemm matrix runs the split on cuda alone
    assert run_conformance("cpu", variants=["cm_v12_cp_async:split_k=4"], quick=True) == []
    with pytest.raises(ArgumentError, match="cm_v01_naive cannot split K"):
        run_conformance("cuda", variants=["cm_v01_naive:split_k=2"], quick=True)


def _available(name: str) -> bool:
    return next(i.available for i in registry.backends() if i.name == name)


def test_matrix_shows_a_split_variant_row(capsys):
    # defect: "polygemm matrix --variants cm_v12_cp_async:split_k=4" said "no case to run" (exit 2), the
    # name having passed its check
    status = main(["matrix", "--backends", "cpu", "cuda", "--quick", "--no-progress", "--variants", "cm_v12_cp_async:split_k=4"])
    out = capsys.readouterr().out
    assert status == 0 and "cm_v12_cp_async:split_k=4" in out, out


def test_modified_variants_of_another_backend_are_not_this_ones():
    be = Splitting()
    assert modified_variants(be, ["tiled:split_k=2", "tiled", "cm_v12_cp_async:split_k=4", "nosuch"]) == \
        {"tiled:split_k=2": be.variants()[0]}
    assert modified_variants(be, None) == {}


def test_pytest_suite_takes_a_split_variant_filter(monkeypatch):
    import polygemm.testing.test_conformance as suite

    be = Splitting()
    monkeypatch.setattr(suite, "get_backend", lambda name: be)
    monkeypatch.setattr(suite, "availability", lambda b: (True, ""))
    monkeypatch.delenv("POLYGEMM_TEST_DTYPES", raising=False)
    monkeypatch.setenv("POLYGEMM_TEST_QUICK", "1")
    monkeypatch.setenv("POLYGEMM_TEST_VARIANTS", "tiled:split_k=2")
    params = suite._params()
    assert params and all(p.values[0][2] == "tiled:split_k=2" for p in params), params[:1]
    monkeypatch.setenv("POLYGEMM_TEST_VARIANTS", "plain:split_k=2")
    (only,) = suite._params()
    assert only.id == "splitting-refused-variant" and "plain cannot split K" in str(only.values[0])
    assert str(only.values[0]).startswith("POLYGEMM_TEST_VARIANTS: variants names 'plain:split_k=2'")
