"""The conformance suite: the cpu reference passes it; variants named with a modifier run by that name."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from polygemm import registry
from polygemm.apps.cli import main
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts, store_result
from polygemm.errors import ArgumentError, UnsupportedProblemError
from polygemm.testing import run_conformance
from polygemm.testing.conformance import iter_cases, modified_variants

from tests.helpers import run_conformance_suites


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


def _available(name: str) -> bool:
    return next(i.available for i in registry.backends() if i.name == name)


def test_cpu_passes_conformance():
    results = run_conformance("cpu")
    counts = collections.Counter(r.status for r in results)
    fails = [r for r in results if r.status == "fail"]
    assert not fails, fails
    assert counts["pass"] > 150
    # the only skips are device-array cases, which a host backend cannot have
    assert {r.group for r in results if r.status == "skip"} == {"device"}


def _cpu_off_in_its_last_element(monkeypatch, by):
    """The cpu backend's reference, its result's last element moved by ``by`` of its size (a wrong backend)."""
    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference

    def off(a, b, c=None, alpha=1.0, beta=0.0, dtype=None):
        r = real(a, b, c, alpha, beta, dtype)
        if r.size:
            r.flat[-1] += by * (abs(r.flat[-1]) + 1)
        return r

    monkeypatch.setattr(cpu, "reference", off)


def test_suite_detects_a_wrong_backend(monkeypatch):
    _cpu_off_in_its_last_element(monkeypatch, 0.1)
    results = run_conformance("cpu", dtypes=["float32"], variants=["reference"], quick=True)
    assert any(r.status == "fail" and r.group == "shapes" for r in results)


def test_cpu_passes_complex_conformance_and_a_backend_that_drops_imaginary_parts_fails(monkeypatch):
    """The suite checks complex products against the bound of the real product they equal: the cpu backend passes
    every case; a reference that drops B's imaginary parts fails the shapes."""
    rows = run_conformance("cpu", dtypes=["complex64", "complex128"], quick=True)
    assert {r.dtype for r in rows} == {"complex64", "complex128"}
    assert not [r for r in rows if r.status == "fail"] and sum(r.status == "pass" for r in rows) > 40

    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference
    monkeypatch.setattr(cpu, "reference", lambda a, b, *rest: real(a, np.asarray(b).real.astype(np.asarray(b).dtype), *rest))
    rows = run_conformance("cpu", dtypes=["complex64"], variants=["reference"], groups="shapes", quick=True)
    assert rows and all(r.status == "fail" and "outside the bound" in r.detail for r in rows if r.case != "empty"), rows


def test_the_pytest_suite_fails_on_filters_that_name_nothing(tmp_path):
    """``pytest --pyargs polygemm.testing`` with a variant or dtype filter the backend lacks (a typo in a plugin's CI)
    fails with a message naming it and what exists, not '1 skipped (empty parameter set)'. A valid filter still
    runs its cases."""
    failing = (({"POLYGEMM_TEST_VARIANTS": "nosuch"}, "'nosuch'"),
               ({"POLYGEMM_TEST_VARIANTS": "blas,nosuch"}, "'nosuch'"),
               ({"POLYGEMM_TEST_DTYPES": "float128"}, "'float128'"))
    valid = {"POLYGEMM_TEST_VARIANTS": "reference", "POLYGEMM_TEST_DTYPES": "float32", "POLYGEMM_TEST_QUICK": "1"}
    *runs, ok = run_conformance_suites(tmp_path, [{"POLYGEMM_TEST_BACKEND": "cpu", **env} for env, _ in failing]
                                       + [{"POLYGEMM_TEST_BACKEND": "cpu", **valid}])
    for (env, named), r in zip(failing, runs):
        assert r.returncode != 0 and named in r.stdout and "its variants: blas" in r.stdout, (env, r.stdout[-2000:])
    assert ok.returncode == 0 and " passed" in ok.stdout, ok.stdout[-2000:]


def test_the_pytest_suite_says_an_integer_dtype_is_not_what_it_checks(tmp_path):
    """POLYGEMM_TEST_DTYPES=int8 of a backend that computes int8: the suite checks no integer products (they are
    exact), and says so, rather than that int8 matches no case while listing it among the backend's dtypes."""
    (r,) = run_conformance_suites(tmp_path, [{"POLYGEMM_TEST_BACKEND": "cpu", "POLYGEMM_TEST_DTYPES": "int8"}])
    assert r.returncode != 0 and "'int8', which the conformance suite does not check" in r.stdout, r.stdout[-2000:]
    assert "match no case" not in r.stdout


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
    assert listed == {("float32", "cm_v12_cp_async:split_k=4"), ("complex64", "cm_v12_cp_async:split_k=4"),
                      ("float16", "hgemm_v1_mma_ldmatrix:split_k=2"), ("bfloat16", "hgemm_v1_mma_ldmatrix:split_k=2")}
    rows = run_conformance("cuda", variants=["cm_v12_cp_async:split_k=4"], quick=True)
    if not _available("cuda"):
        assert [(r.dtype, r.variant, r.status) for r in rows] == [("float32", "cm_v12_cp_async:split_k=4", "skip"),
                                                                  ("complex64", "cm_v12_cp_async:split_k=4", "skip")]
        assert rows[0].detail.startswith("backend unavailable: ")
    else:  # on a GPU: the whole grid under the split's name
        assert rows and {r.variant for r in rows} == {"cm_v12_cp_async:split_k=4"}
        assert not [r for r in rows if r.status == "fail"], [r for r in rows if r.status == "fail"]
    # a variant of another backend still selects nothing; polygemm matrix runs the split on cuda alone
    assert run_conformance("cpu", variants=["cm_v12_cp_async:split_k=4"], quick=True) == []
    with pytest.raises(ArgumentError, match="cm_v01_naive cannot split K"):
        run_conformance("cuda", variants=["cm_v01_naive:split_k=2"], quick=True)


def test_matrix_shows_a_split_variant_row(capsys):
    # "polygemm matrix --variants cm_v12_cp_async:split_k=4" shows a row for the split variant whose name passed its
    # check, not "no case to run" (exit 2)
    status = main(["matrix", "--backends", "cpu", "cuda", "--quick", "--no-progress", "--variants", "cm_v12_cp_async:split_k=4"])
    out = capsys.readouterr().out
    assert "cm_v12_cp_async:split_k=4" in out, out
    # the cuda backend named and every case skipped (no GPU here): exit status 1, as for any named backend that ran nothing
    import polygemm

    assert status == (0 if polygemm.registry.get_backend("cuda").probe().ok else 1)


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


@pytest.mark.parametrize("kw, says", [
    ({"dtypes": ["float8"]}, "dtypes names 'float8'"),
    ({"groups": ["shape"]}, "groups names 'shape'"),
    ({"variants": ["blass"]}, "did you mean 'blas'?"),
    ({"variants": ["auto"]}, "the suite runs each variant by name"),
    ({"dtypes": [np.float32]}, "dtypes must be names"),
])
def test_run_conformance_selection_naming_nothing_is_refused_not_an_empty_pass(kw, says):
    # a misspelt dtype, variant or group would select no case, and an empty result would pass a CI asserting "no fail"
    # having tested nothing: refused
    with pytest.raises(ArgumentError, match=says) as info:
        run_conformance("cpu", quick=True, **kw)
    assert isinstance(info.value, ValueError)


def test_run_conformance_takes_one_string_as_names_comma_separated():
    # dtypes="float32" is one name, not the characters 'f', 'l', 'o', ... (no case, no row, silently)
    rows = run_conformance("cpu", dtypes="float32", variants="blas", groups="errors, scaling", quick=True)
    assert rows and {(r.dtype, r.variant) for r in rows} == {("float32", "blas")}
    assert {r.group for r in rows} == {"errors", "scaling"} and all(r.status == "pass" for r in rows), rows
    # a variant of another backend selects nothing here (polygemm matrix passes one list to every backend)
    assert run_conformance("cpu", variants=["cublas"], quick=True) == []


def test_an_unregistered_backend_object_is_run_through_its_execute_too(doc_plugin):
    # the same for a Backend object passed to run_conformance (not installed): its execute() is tested, not its run()
    # alone
    import polygemm_fast

    rows = run_conformance(polygemm_fast.FastBackend(), groups="scaling", quick=True)
    assert rows and all(r.status == "fail" for r in rows if r.case in ("alpha_beta_c", "alpha_no_c")), rows


def test_a_dtype_selection_that_leaves_the_backend_nothing_is_refused_not_an_empty_pass():
    # a plugin's CI reading "no failing row" would pass on no row at all
    import dataclasses

    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class Float32Only(CpuReferenceBackend):
        name = "f32only"

        def variants(self):
            return [dataclasses.replace(v, dtypes=("float32",)) for v in super().variants() if v.name == "blas"]

    with pytest.raises(ArgumentError, match="no case to run on 'f32only'") as exc:
        run_conformance(Float32Only(), dtypes=["float16"], quick=True)
    assert "declare float32" in str(exc.value) and "asks for float16" in str(exc.value)
    assert run_conformance(Float32Only(), dtypes=["float16"], quick=True, allow_empty=True) == []


def test_a_variant_selection_of_the_backends_own_that_leaves_nothing_is_refused():
    """variants=["blas"] where this backend's blas computes integers only: no case, said (a vendor's CI would read no
    failing row as a pass); a variant of another backend still selects nothing quietly (polygemm matrix's list)."""
    import dataclasses

    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class IntBlas(CpuReferenceBackend):
        name = "intblas"

        def variants(self):
            return [dataclasses.replace(v, dtypes=("int32",)) if v.name == "blas" else v for v in super().variants()]

    with pytest.raises(ArgumentError, match="no case to run on 'intblas': variant blas declares int32"):
        run_conformance(IntBlas(), variants=["blas"], quick=True)
    assert run_conformance(IntBlas(), variants=["cublas"], quick=True) == []
    assert run_conformance(IntBlas(), variants=["reference"], dtypes=["float32"], groups="scaling", quick=True)


class OnePass(Backend):
    """A host plugin whose one float32 variant rounds its inputs to bfloat16 once ("medium", as torch's one pass);
    ``garbage``: it returns 42 everywhere instead."""

    name = "onepass"
    priority = 300

    def __init__(self, garbage: bool = False) -> None:
        super().__init__()
        self.garbage = garbage

    def probe(self):
        return Availability(True)

    def variants(self):
        return (Variant("bf16_once", ("float32",), "float32 inputs rounded to bfloat16, float32 sums", precision="medium"),)

    def plan(self, problem, variant="auto"):
        chosen = self.get_variant("bf16_once" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        return Plan(self.name, chosen.name, "test", problem, layouts=host_layouts(problem))

    def run(self, plan):
        import ml_dtypes

        p = plan.problem
        one = lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
        with np.errstate(all="ignore"):
            res = p.alpha * (one(p.a.array) @ one(p.b.array))
            if p.c is not None and p.beta != 0.0:
                res = res + p.beta * p.c.array.astype(np.float64)
        if self.garbage:
            res = np.full(res.shape, 42.0)
        return store_result(res.astype(p.dtype), None if p.out is None else p.out.array)


def test_a_medium_variant_is_run_at_medium_and_held_to_its_bound():
    # the process default ("highest") would refuse every product of a one-pass variant: the suite asks for the variant's
    # own class, so a correct one passes its numeric cases (not skips them) and a wrong one fails
    results = run_conformance(OnePass(), quick=True)
    counts = collections.Counter(r.status for r in results)
    assert counts["fail"] == 0 and counts["pass"] >= 10, [r for r in results if r.status != "pass"]
    results = run_conformance(OnePass(garbage=True), quick=True)
    assert sum(r.status == "fail" for r in results) >= 5


def test_run_conformance_refuses_what_is_not_a_backend_or_a_selection():
    from polygemm.errors import ArgumentTypeError

    for bad in (None, 3, object()):
        with pytest.raises(ArgumentTypeError, match="backend must be"):
            run_conformance(bad)
    with pytest.raises(ArgumentTypeError, match="quick must be True or False"):
        run_conformance("cpu", quick="no")
    with pytest.raises(ArgumentTypeError, match="progress must be a callable"):
        run_conformance("cpu", progress=3)
    for arg in ("dtypes", "groups", "variants"):
        with pytest.raises(ArgumentError, match=f"{arg} names nothing"):
            run_conformance("cpu", **{arg: []})


def test_results_sharing_memory_and_a_batch_computed_once_are_caught():
    """A backend that hands every call without out one buffer (the next call overwrites the last result), or C's own
    memory for alpha = 0, beta = 1, fails "fresh_results"; one that writes the first matrix's product into every
    slot of a batch fails "batch"."""
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class Reuses(CpuReferenceBackend):
        name = "reuses"

        def __init__(self):
            super().__init__()
            self.kept = {}

        def execute(self, plan, call):
            got = super().execute(plan, call)
            if plan.problem.out is not None:
                return got
            buf = self.kept.setdefault((got.shape, got.dtype.str), np.empty_like(got))
            buf[...] = got
            return buf

    class FirstOnly(CpuReferenceBackend):
        name = "firstonly"

        def execute(self, plan, call):
            got = super().execute(plan, call)
            if got.ndim > 2:
                got[1:] = got[0]
            return got

    rows = run_conformance(Reuses(), dtypes="float32", variants="blas", groups="scaling", quick=True)
    bad = {r.case: r.detail for r in rows if r.status == "fail"}
    assert set(bad) == {"fresh_results"} and "one buffer reused" in bad["fresh_results"], rows
    rows = run_conformance(FirstOnly(), dtypes="float32", variants="blas", groups="shapes", quick=True)
    assert {r.case for r in rows if r.status == "fail"} == {"batch"}, rows
    assert {r.case for r in run_conformance("cpu", dtypes="float32", groups="shapes", quick=True) if r.status == "pass"} >= {"batch"}


def test_every_failure_names_its_seed(monkeypatch):
    """The seed is in every failure's detail, the NaN and Inf cases' and the returned-out checks' too."""
    from polygemm.backends.cpu_ref import backend as cpu

    real = cpu.reference
    monkeypatch.setattr(cpu, "reference", lambda *args, **kw: np.nan_to_num(real(*args, **kw), nan=0.0, posinf=0.0))
    rows = run_conformance("cpu", dtypes="float32", variants="reference", groups="nan_inf", quick=True)
    fails = [r for r in rows if r.status == "fail"]
    assert fails and all(r.detail.count("(seed ") == 1 for r in fails), fails


def test_a_failures_seed_replays_its_inputs(monkeypatch):
    """run_conformance(seed=N) runs a case on the inputs of the failure that named seed N: the same detail again."""
    import re

    _cpu_off_in_its_last_element(monkeypatch, 0.5)
    pick = {"dtypes": "float32", "variants": "reference", "groups": "shapes", "quick": True}
    first = next(r for r in run_conformance("cpu", **pick) if r.status == "fail" and r.case == "127x129x131")
    seed = int(re.search(r"\(seed (\d+)\)", first.detail).group(1))
    again = next(r for r in run_conformance("cpu", seed=seed, **pick) if r.case == "127x129x131")
    assert again.detail == first.detail
    with pytest.raises(ArgumentError, match="seed must be an integer"):
        run_conformance("cpu", seed=-1, **pick)


def _packed(x: np.ndarray) -> np.ndarray:
    """``x`` read as if its leading dimension were its rows' or columns' length (a backend ignoring ``.ld``)."""
    if x.ndim != 2 or x.flags.c_contiguous or x.flags.f_contiguous:
        return x
    row = abs(x.strides[1]) == x.itemsize
    strides = (x.shape[1] * x.itemsize, x.itemsize) if row else (x.itemsize, x.shape[0] * x.itemsize)
    return np.lib.stride_tricks.as_strided(x, x.shape, strides)


def test_a_backend_reading_past_a_views_leading_dimension_fails_the_padded_case():
    """Operands and out in place as views of wider buffers: a backend that takes the leading dimension for the
    matrix's width fails "padded_ld" (and the other layouts, of dense arrays, pass); one writing all of out's buffer
    fails it too, naming the elements outside out."""
    from polygemm.backend import store_result
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend, reference

    class IgnoresLd(CpuReferenceBackend):
        name = "ignoresld"

        def execute(self, plan, call):
            c = None if call.c is None else _packed(call.c)
            return store_result(reference(_packed(call.a), _packed(call.b), c, call.alpha, call.beta, call.a.dtype), call.out)

    class WritesTheBuffer(CpuReferenceBackend):
        name = "writesthebuffer"

        def execute(self, plan, call):
            got = super().execute(plan, call)
            out = call.out
            if out is not None and not (out.flags.c_contiguous or out.flags.f_contiguous):
                row = out.strides[1] == out.itemsize
                width = out.strides[0] // out.itemsize if row else out.strides[1] // out.itemsize
                whole = np.lib.stride_tricks.as_strided(out, (out.shape[0], width) if row else (width, out.shape[1]))
                whole[(slice(None), slice(out.shape[1], None)) if row else (slice(out.shape[0], None), slice(None))] = 0
            return got

    rows = run_conformance(IgnoresLd(), dtypes="float32", variants="blas", groups="layouts")
    assert {r.case for r in rows if r.status == "fail"} == {"padded_ld"}, rows
    rows = run_conformance(WritesTheBuffer(), dtypes="float32", variants="blas", groups="layouts")
    bad = {r.case: r.detail for r in rows if r.status == "fail"}
    assert set(bad) == {"padded_ld"} and "outside out" in bad["padded_ld"], rows


def test_a_backend_keeping_a_calls_state_on_itself_fails_the_threads_case():
    """Calls from several threads at once: a backend that keeps the call it runs on itself (the next thread's call
    replaces it mid-run) fails "threads", saying where per-call state belongs."""
    import time

    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class Stateful(CpuReferenceBackend):
        name = "stateful"

        def execute(self, plan, call):
            self.call = call
            time.sleep(0.002)  # (another thread's call lands here)
            return super().execute(plan, self.call)

    rows = run_conformance(Stateful(), dtypes="float32", variants="blas", groups="scaling")
    bad = {r.case: r.detail for r in rows if r.status == "fail"}
    assert "threads" in bad and "never on the backend" in bad["threads"], rows
    assert {r.case for r in run_conformance("cpu", dtypes="float32", groups="scaling") if r.status == "pass"} >= {"threads"}


def test_a_call_that_fails_from_one_thread_too_is_not_blamed_on_threads():
    """A backend wrong on its own (its last row unwritten) fails "threads" with its own failure, not told to keep
    per-call state off the backend."""
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class LastRowUnwritten(CpuReferenceBackend):
        name = "lastrowunwritten"

        def execute(self, plan, call):
            got = np.array(super().execute(plan, call))
            got[-1] = 0
            return got

    rows = run_conformance(LastRowUnwritten(), dtypes="float32", variants="blas", groups="scaling")
    bad = {r.case: r.detail for r in rows if r.status == "fail"}
    assert "one thread alone too" in bad["threads"] and "never on the backend" not in bad["threads"], rows
    assert "elements outside the bound" in bad["threads"]


def test_a_failure_names_the_products_shape_and_dtype(monkeypatch):
    """Cases whose names say no shape (scaling's, nan_inf's) fail naming the product's M, N, K and dtype."""
    _cpu_off_in_its_last_element(monkeypatch, 0.5)
    rows = run_conformance("cpu", dtypes="float64", variants="reference", groups="scaling", quick=True)
    bad = {r.case: r.detail for r in rows if r.status == "fail"}
    assert "33x19x45 (MxNxK) float64: " in bad["alpha_beta_c"], bad
    assert "x the bound)" in bad["alpha_beta_c"]


@pytest.mark.parametrize("kw", [{"dtypes": 3}, {"dtypes": np.float32}, {"groups": [1]}, {"allow_empty": "yes"}])
def test_run_conformance_selections_of_the_wrong_type_are_named(kw):
    name = next(iter(kw))
    with pytest.raises(TypeError, match=f"^{name} must be"):
        run_conformance("cpu", **kw)


def test_one_element_off_in_float16_is_not_blamed_on_the_accumulator(monkeypatch):
    """The float16 accumulator's hint goes with errors spread over the result, not with one element off."""
    _cpu_off_in_its_last_element(monkeypatch, 0.01)
    rows = run_conformance("cpu", dtypes="float16", variants="reference", groups="shapes")
    fails = [r for r in rows if r.status == "fail"]
    assert fails and not [r for r in fails if "accumulat" in r.detail], fails


def test_a_backend_that_writes_an_input_fails_saying_which():
    """The read-only flag of a host input is a flag a backend could lift: one that writes a (and computes with what it
    wrote, so its result matches a reference of the inputs as they are after the call) fails, naming a (where the core
    copied a strided a first, the write lands in the copy and the result is what is wrong)."""
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    class WritesA(CpuReferenceBackend):
        name = "writesa"

        def execute(self, plan, call):
            if call.a.size:
                call.a.flags.writeable = True
                call.a[(0,) * call.a.ndim] = 3
            return super().execute(plan, call)

    rows = run_conformance(WritesA(), dtypes="float32", variants="blas", groups="layouts", quick=True)
    named = {r.case for r in rows if r.status == "fail" and "modified its input a" in r.detail}
    assert {"a=C b=C", "a=F b=F", "padded_ld"} <= named, rows


def test_a_dtype_selection_takes_the_short_names_matrix_takes():
    rows = run_conformance("cpu", dtypes="fp32, BF16", groups="layouts", quick=True)
    assert {r.dtype for r in rows} == {"float32", "bfloat16"} and all(r.status == "pass" for r in rows)


def test_a_supports_that_breaks_the_contract_fails_and_a_reason_is_a_skip_saying_it():
    """device="auto" weighs a backend through supports(), which device=name never asks: one answering True (no answer of
    the contract) or raising fails the auto case; one giving a reason is a skip that says it."""
    from polygemm.backends.cpu_ref.backend import CpuReferenceBackend

    def backend(answer):
        class Answers(CpuReferenceBackend):
            name = "answers"

            def supports(self, problem):
                if isinstance(answer, BaseException):
                    raise answer
                return answer

        return Answers()

    for answer, status, says in ((True, "fail", "supports() returned bool True"), (OSError("ioctl"), "fail", "OSError: ioctl"),
                                 ("no float32 today", "skip", "passes backend 'answers' over"), (None, "pass", "")):
        rows = run_conformance(backend(answer), dtypes="float32", variants="blas", groups="auto")
        assert [(r.case, r.status) for r in rows] == [("supports", status)] and says in rows[0].detail, rows
