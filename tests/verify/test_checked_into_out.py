"""A verified call with ``out`` whose backend computes, checks and delivers the product in one go
(``checked_execute``, the cuda backend's): what the core does with what it reports, on stand-ins. The cuda
side is tested on its emulated runtime (tests/backends/cuda/test_verify_emulated.py) and on the GPU."""

from __future__ import annotations

import types

import numpy as np
import pytest

import polygemm as pg
from polygemm.backend import Plan
from polygemm.core.normalize import normalize
from polygemm.verification.call import verified_gemm
from polygemm.verification.report import CheckReport, Finding


class Checked:
    def __init__(self, ok: bool, out: np.ndarray, value: np.ndarray) -> None:
        rows = () if ok else (Finding(3, 9.0, 1.0),)
        self.report = CheckReport.of(ok, 6, 0, 0 if ok else 1, rows, (), 0.5 if ok else float("inf"), "the device (stand-in)",
                                     {"backend": "stub", "variant": "v1", "shape": "6x5x4 (MxNxK) float32"})
        self.out, self.value, self.events = out, value, []

    def deliver(self) -> None:
        self.events.append("deliver")
        self.out[...] = self.value

    def close(self) -> None:
        self.events.append("close")


class Calls:
    """The callables verified_gemm takes, recording what it asked of each."""

    def __init__(self, a, b, out, ok: bool, handled: bool = True) -> None:
        self.a, self.b, self.out = a, b, out
        self.asked: list[str] = []
        self.recorded: list[bool] = []
        self.product = (a.astype(np.float64) @ b).astype(np.float32)
        wrong = self.product.copy()
        wrong[3, 1] += 9.0
        self.checked = Checked(ok, out, self.product if ok else wrong) if handled else None
        problem = normalize(a, b, None, out=out)
        self.plan = Plan("stub", "v1", "", problem)
        backend = types.SimpleNamespace(checked_execute=self.checked_execute,
                                        scalar_dtype=lambda dtype: np.dtype(np.float32))
        self.entry = types.SimpleNamespace(backend=backend, plan=self.plan)

    def checked_execute(self, plan, call, seed, about):
        """The backend's: computed and checked; delivered into out where it passed."""
        if self.checked is not None and self.checked.report.ok:
            self.checked.deliver()
        return self.checked

    def bind(self, *args):
        self.asked.append("bind")
        return self.entry, types.SimpleNamespace(alpha=1.0, beta=0.0), self.recorded.append

    def run(self, a, b, c, **kw):
        self.asked.append("run")
        return self.product.copy()

    def last_product(self):
        return Plan("cpu", "numpy", "", normalize(self.a, self.b, None)), 1.0, 0.0

    def validate(self, *args, **kw):
        self.asked.append("validate")
        return self.plan

    def call(self, mode: str):
        return verified_gemm(self.run, self.last_product, self.validate, mode, self.a, self.b, None, 1.0, 0.0, None, "auto",
                             self.out, None, None, bind=self.bind)


def _calls(rng, ok=True, handled=True) -> Calls:
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    return Calls(a, b, np.full((6, 5), -1.0, np.float32), ok, handled)


def test_a_product_that_passed_is_in_out_with_one_bind_and_no_product_of_its_own(rng):
    calls = _calls(rng)
    assert calls.call("raise") is calls.out
    assert calls.asked == ["bind"] and calls.recorded == [True] and calls.checked.events == ["deliver", "close"]
    np.testing.assert_array_equal(calls.out, calls.product)


def test_a_failed_check_raises_with_out_untouched_and_the_scratch_given_back(rng):
    calls = _calls(rng, ok=False)
    with pytest.raises(pg.VerificationError, match=r"'v1'.*out is untouched") as info:
        calls.call("raise")
    assert info.value.report.rows[0].index == 3
    assert (calls.out == -1.0).all() and calls.checked.events == ["close"] and calls.recorded == [False]


def test_warn_hands_the_product_over_all_the_same(rng):
    calls = _calls(rng, ok=False)
    with pytest.warns(pg.VerificationWarning, match="returned all the same"):
        assert calls.call("warn") is calls.out
    assert calls.checked.events == ["deliver", "close"] and calls.recorded == [False, True]
    assert calls.out[3, 1] != calls.product[3, 1]  # what was computed, as warn promises


def test_retry_computes_a_result_of_its_own_and_delivers_it_once_checked(rng, caplog):
    calls = _calls(rng, ok=False)
    assert calls.call("retry") is calls.out
    assert calls.asked == ["bind", "run"] and calls.checked.events == ["close"]
    np.testing.assert_array_equal(calls.out, calls.product)
    assert "recomputed with variant" in caplog.text


def test_a_call_the_backend_does_not_take_is_checked_as_a_result_of_its_own(rng):
    calls = _calls(rng, handled=False)
    assert calls.call("raise") is calls.out
    assert calls.asked == ["bind", "validate", "run"] and calls.recorded == []
    np.testing.assert_array_equal(calls.out, calls.product)


def test_injected_faults_take_the_result_of_its_own(rng):
    calls = _calls(rng)
    with pg.testing.inject_fault(0, 0, value=1e6), pytest.raises(pg.VerificationError):
        calls.call("raise")
    assert "bind" not in calls.asked and (calls.out == -1.0).all()


def test_a_report_made_by_of_is_the_one_its_constructor_makes():
    """CheckReport.of fills the frozen dataclass's fields directly (each checked call makes one): every field, and the
    report's equality, repr and replace, as the constructor gives them."""
    import dataclasses

    about = {"backend": "cuda", "device": "GPU 0", "variant": "v", "shape": "4x5x6 (MxNxK) float32"}
    rows = (Finding(1, 2.0, 1.0, ()),)
    fast = CheckReport.of(False, 4, 1, 1, rows, (), float("inf"), "the device (GPU 0)", about, failed_columns=2)
    made = CheckReport(False, 4, 1, 1, rows, (), float("inf"), "the device (GPU 0)", "cuda", "GPU 0", "v",
                       "4x5x6 (MxNxK) float32", failed_columns=2)
    assert fast == made and repr(fast) == repr(made) and fast.message() == made.message()
    assert {f.name for f in dataclasses.fields(CheckReport)} == set(vars(fast))
    assert dataclasses.replace(fast, attempts=("first",)).attempts == ("first",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.ok = True  # type: ignore[misc]
