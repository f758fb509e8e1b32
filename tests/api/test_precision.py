"""precision=: the values gemm, matmul, explain and the CLI take, the process default (setter and
$POLYGEMM_PRECISION), the plan cache keyed on it, and the refusal of a precision a backend cannot meet."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main
from polygemm.core import precision as precision_mod
from polygemm.errors import ArgumentError, ArgumentTypeError, UnsupportedProblemError

from tests.plugin_sources import install_fake_distribution


@pytest.fixture(autouse=True)
def keep_default():
    """Every test leaves the process default as it found it."""
    before = pg.get_float32_matmul_precision()
    yield
    pg.set_float32_matmul_precision(before)


def _ops(rng, dtype=np.float32, m=5, n=7, k=9):
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


@pytest.mark.parametrize("precision", ["highest", "high", "medium"])
def test_every_precision_runs_on_the_cpu_within_the_float32_bound(rng, precision):
    a, b = _ops(rng)
    got = pg.gemm(a, b, precision=precision, device="cpu")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    plan = pg.last_plan()
    assert plan.problem.precision == precision
    # the cpu's float32 path is SGEMM-level: it meets the precision asked, and says the one it used with its bound
    assert plan.precision.startswith("highest") and "2^-24" in plan.precision
    assert (precision == "highest") == ("asked" not in plan.precision)
    v = pg.matmul(a, b[:, 0], precision=precision)
    np.testing.assert_allclose(v, a.astype(np.float64) @ b[:, 0], rtol=1e-5, atol=1e-5)


def test_explain_names_the_precision_asked_and_used(rng):
    a, b = _ops(rng)
    plan = pg.explain(a, b, precision="medium")
    assert plan.problem.precision == "medium"
    text = str(plan)
    assert "precision: highest" in text and "'medium'" in text and "bound" in text


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_precision_changes_nothing_for_dtypes_it_does_not_govern(rng, dtype):
    from polygemm.problem import dtype_named

    a, b = _ops(rng, dtype_named(dtype))
    plan = pg.explain(a, b, precision="medium")
    assert "governs float32 and complex64 only" in plan.precision
    assert np.array_equal(pg.gemm(a, b, precision="medium"), pg.gemm(a, b, precision="highest"))


@pytest.mark.parametrize("func", [pg.gemm, pg.matmul, pg.explain], ids=["gemm", "matmul", "explain"])
@pytest.mark.parametrize("bad", ["higest", "low", "float32", ""])
def test_a_bad_precision_is_an_argument_error_naming_the_values(rng, func, bad):
    a, b = _ops(rng)
    out = np.full((5, 7), 7.0, np.float32)
    with pytest.raises(ArgumentError) as info:
        func(a, b, out=out, precision=bad)
    msg = str(info.value)
    assert "precision" in msg and all(f"'{p}'" in msg for p in ("highest", "high", "medium"))
    assert (out == 7.0).all()
    if bad == "higest":
        assert "did you mean 'highest'" in msg


@pytest.mark.parametrize("given", ["HIGH", " high ", np.str_("high"), "High"])
def test_a_precision_is_read_in_any_case_and_as_a_numpy_string(rng, given):
    a, b = _ops(rng)
    pg.gemm(a, b, precision=given)
    assert pg.last_plan().problem.precision == "high"
    assert pg.explain(a, b, precision=given).problem.precision == "high"


@pytest.mark.parametrize("bad", [1, None.__class__, ["high"], b"high"])
def test_a_precision_that_is_no_string_is_a_type_error(rng, bad):
    a, b = _ops(rng)
    with pytest.raises(ArgumentTypeError) as info:
        pg.gemm(a, b, precision=bad)
    assert isinstance(info.value, TypeError) and "precision must be a string" in str(info.value)


def test_the_setter_sets_the_default_of_later_calls(rng):
    a, b = _ops(rng)
    assert pg.get_float32_matmul_precision() == "highest"
    pg.set_float32_matmul_precision("medium")
    assert pg.get_float32_matmul_precision() == "medium"
    pg.gemm(a, b)
    assert pg.last_plan().problem.precision == "medium"
    pg.gemm(a, b, precision="high")  # an explicit precision wins over the default
    assert pg.last_plan().problem.precision == "high"
    with pytest.raises(ArgumentError, match="precision"):
        pg.set_float32_matmul_precision("fast")
    assert pg.get_float32_matmul_precision() == "medium"  # a refused value changes nothing


def test_a_plan_made_under_one_precision_is_not_reused_for_another(rng):
    a, b = _ops(rng)
    pg.gemm(a, b)
    pg.gemm(a, b)
    assert pg.last_plan().cached and pg.last_plan().problem.precision == "highest"
    pg.set_float32_matmul_precision("medium")
    pg.gemm(a, b)
    plan = pg.last_plan()
    assert not plan.cached and plan.problem.precision == "medium"
    pg.gemm(a, b, precision="medium")  # the default and the same value given: one plan
    assert pg.last_plan().cached
    pg.gemm(a, b, precision="highest")  # the plan made first, reused
    assert pg.last_plan().cached and pg.last_plan().problem.precision == "highest"
    assert pg.plan_cache_info()["size"] == 2


def test_the_environment_gives_the_default():
    assert precision_mod.precision_from_env(None) == "highest"
    assert precision_mod.precision_from_env(" ") == "highest"
    assert precision_mod.precision_from_env("high") == "high"
    with pytest.warns(RuntimeWarning, match=r"POLYGEMM_PRECISION.*'highest'"):
        assert precision_mod.precision_from_env("fastest") == "highest"
    env = dict(os.environ, POLYGEMM_PRECISION="medium")
    code = ("import numpy as np, polygemm as pg; print(pg.get_float32_matmul_precision()); "
            "pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)); print(pg.last_plan().problem.precision)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["medium", "medium"]


def test_a_bad_environment_value_does_not_break_import_under_warnings_as_errors():
    env = dict(os.environ, POLYGEMM_PRECISION="bogus")
    code = "import polygemm as pg; print(pg.get_float32_matmul_precision())"
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "highest", run.stderr
    # named as POLYGEMM_VERIFY's warning names its variable, with the value and the values taken
    assert "POLYGEMM_PRECISION='bogus' is not a precision" in run.stderr and "$" not in run.stderr
    assert all(p in run.stderr for p in ("'highest'", "'high'", "'medium'"))


ONE_PASS = """
import numpy as np
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts

class OnePass(Backend):
    name = "onepass"
    priority = 350
    def probe(self):
        return Availability(True)
    def variants(self):
        return (Variant("tf32", ("float32",), "one pass on the tensor cores", precision="medium"),
                Variant("dgemm", ("float64",), "double"))
    def plan(self, problem, variant="auto"):
        v = "tf32" if problem.dtype.name == "float32" else "dgemm"
        return Plan(self.name, v, "the only one", problem, layouts=host_layouts(problem))
    def run(self, plan):
        p = plan.problem
        return np.matmul(p.a.array, p.b.array, out=None if p.out is None else p.out.array)
"""


@pytest.fixture
def one_pass(tmp_path, monkeypatch, without_gpu, fresh_registry):
    install_fake_distribution(tmp_path, "pg_onepass", "pg_onepass_plugin", ONE_PASS, {"onepass": "pg_onepass_plugin:OnePass"})
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    yield pg.get_backend("onepass")
    sys.modules.pop("pg_onepass_plugin", None)


def test_a_backend_declares_what_it_offers(one_pass):
    assert one_pass.precisions("float32") == ("medium",)
    assert one_pass.precisions("float64") == ("highest", "high", "medium")  # not governed: any is taken
    assert pg.get_backend("cpu").precisions("float32") == ("highest", "high", "medium")


def test_an_explicit_precision_a_backend_cannot_meet_is_refused_with_the_alternatives(rng, one_pass):
    a, b = _ops(rng)
    out = np.full((5, 7), 7.0, np.float32)
    for asked in ("highest", "high"):
        with pytest.raises(UnsupportedProblemError) as info:
            pg.gemm(a, b, device="onepass", precision=asked, out=out)
        msg = str(info.value)
        assert f"precision={asked!r}" in msg and "'onepass'" in msg and "precision='medium'" in msg and "device='cpu'" in msg
        assert (out == 7.0).all()
    pg.gemm(a, b, device="onepass", precision="medium", out=out)
    assert pg.last_plan().backend == "onepass" and pg.last_plan().precision.startswith("medium")
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    pg.gemm(a.astype(np.float64), b.astype(np.float64), device="onepass")  # float64: precision does not govern it


def test_auto_passes_over_a_backend_below_the_precision_asked(rng, one_pass):
    a, b = _ops(rng)
    plan = pg.explain(a, b)  # highest: the one-pass backend is passed over, and says why
    assert plan.backend == "cpu"
    why = dict(plan.candidates)["onepass"]
    assert "precision='highest'" in why
    assert pg.explain(a, b, precision="medium").backend == "onepass"


def test_the_cli_takes_precision(capsys):
    assert main(["gemm", "--shape", "8x8x8", "--device", "cpu", "--precision", "medium", "--repeat", "1", "--check"]) == 0
    out = capsys.readouterr().out
    assert "precision: highest" in out and "'medium'" in out and "PASS" in out
    assert main(["explain", "--shape", "8x8x8", "--device", "cpu", "--precision", "high", "--json"]) == 0
    import json

    record = json.loads(capsys.readouterr().out)
    assert record["precision"] == "high" and record["precision_used"].startswith("highest")
    with pytest.raises(SystemExit):
        main(["gemm", "--shape", "8x8x8", "--precision", "fast"])
    assert "highest" in capsys.readouterr().err


def test_the_cli_explains_complex_and_integer_products(capsys):
    assert main(["explain", "--shape", "4x5x6", "--dtype", "complex64", "--precision", "medium"]) == 0
    out = capsys.readouterr().out
    assert "backend : cpu" in out and "complex64" in out and "precision: highest" in out
    assert main(["explain", "--shape", "4x5x6", "--dtype", "int16", "--json"]) == 0
    import json

    record = json.loads(capsys.readouterr().out)
    assert record["dtype"] == "int16" and record["backend"] == "cpu" and "exact" in record["precision_used"]
