"""verify= on gemm, matmul and explain: the values taken, the process default and $POLYGEMM_VERIFY,
what a failed check does (raise, warn, retry) and what it leaves untouched."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import polygemm as pg
from polygemm import api
from polygemm.testing import inject_fault


@pytest.fixture(autouse=True)
def _no_default():
    pg.set_verify(None)
    yield
    pg.set_verify(None)


def _ops(rng, m=24, n=20, k=16, dtype=np.float32):
    return rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)


@pytest.mark.parametrize("mode", [None, "off", "raise", "warn", "retry", "RAISE", " warn ", True, False])
def test_every_mode_computes_a_correct_product(rng, mode):
    a, b = _ops(rng)
    got = pg.gemm(a, b, verify=mode)
    pg.testing.assert_close(got, a, b)
    pg.testing.assert_close(pg.matmul(a, b, verify=mode), a, b)


@pytest.mark.parametrize("bad", ["on", "strict", "", 1, 0.0, ["raise"]])
def test_a_bad_value_names_verify_and_the_accepted_values(rng, bad):
    a, b = _ops(rng)
    for name, call in (("verify", lambda: pg.gemm(a, b, verify=bad)), ("verify", lambda: pg.matmul(a, b, verify=bad)),
                       ("verify", lambda: pg.explain(a, b, verify=bad)), ("mode", lambda: pg.set_verify(bad))):
        with pytest.raises(pg.ArgumentError) as exc:
            call()
        assert isinstance(exc.value, ValueError)
        text = str(exc.value)
        assert text.startswith(name) and all(m in text for m in ("'off'", "'raise'", "'warn'", "'retry'"))


def test_a_failed_check_raises_naming_row_column_threshold_backend_and_variant(rng):
    a, b = _ops(rng, m=40, n=30, k=50)
    with inject_fault(7, 11, value=1e4):
        with pytest.raises(pg.VerificationError) as exc:
            pg.gemm(a, b, device="cpu", verify="raise")  # (auto may take a GPU where there is one)
    err = exc.value
    assert isinstance(err, pg.PolygemmError) and isinstance(err, RuntimeError)
    text = str(err)
    for word in ("rows 7", "columns 11", "threshold", "'cpu'", "'blas'", "40x30x50"):
        assert word in text, (word, text)
    assert err.report.failed == 1 and err.report.rows[0].index == 7 and err.report.columns[0].index == 11
    assert err.report.rows[0].diff > err.report.rows[0].threshold


@pytest.mark.parametrize("faults", [5, 7])
def test_the_message_marks_rows_and_columns_beyond_those_it_names(rng, faults):
    """Each list is cut to the first five, with ", ..." where more rows (or columns) failed than it names."""
    import contextlib

    a, b = _ops(rng, m=40, n=30, k=50)
    with contextlib.ExitStack() as stack:
        for i in range(faults):
            stack.enter_context(inject_fault(2 * i, 3 * i, value=1e4))
        with pytest.raises(pg.VerificationError) as exc:
            pg.gemm(a, b, device="cpu", verify="raise")
    report, text = exc.value.report, str(exc.value)
    assert report.failed == faults and report.failed_columns == faults
    rows, _, columns = text.partition("; columns ")
    assert rows.endswith("x), ...") == (faults > 5) and columns.count(" (off by ") == 5
    assert columns.partition(" (checked on")[0].endswith("x), ...") == (faults > 5), text


def test_a_flipped_exponent_bit_is_caught(rng):
    a, b = _ops(rng)
    with inject_fault(2, 3, bit=30):
        with pytest.raises(pg.VerificationError):
            pg.gemm(a, b, verify="raise")


def test_a_fault_in_a_batch_names_its_matrix(rng):
    a = rng.standard_normal((3, 8, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    with inject_fault(4, 1, value=50.0, batch=(2,)):
        with pytest.raises(pg.VerificationError) as exc:
            pg.gemm(a, b, verify="raise")
    assert exc.value.report.rows[0].batch == (2,) and "[2], 4" in str(exc.value)


@pytest.mark.parametrize("in_place", [False, True])
def test_on_failure_out_and_c_are_untouched(rng, in_place):
    a, b = _ops(rng)
    c = rng.standard_normal((24, 20)).astype(np.float32)
    c_before = c.copy()
    out = c if in_place else np.full((24, 20), 7.0, np.float32)
    out_before = out.copy()
    with inject_fault(0, 0, value=1e6):
        with pytest.raises(pg.VerificationError) as exc:
            pg.gemm(a, b, c, beta=0.5, out=out, verify="raise")
    assert "untouched" in str(exc.value)
    np.testing.assert_array_equal(c, c_before)
    np.testing.assert_array_equal(out, out_before)
    # and a passing check writes out (in place too) with the right values
    got = pg.gemm(a, b, c, beta=0.5, out=out, verify="raise")
    assert got is out
    pg.testing.assert_close(out, a, b, c_before, 1.0, 0.5)


def test_out_is_refused_as_gemm_refuses_it_before_anything_runs(rng):
    a, b = _ops(rng)
    with pytest.raises(pg.ShapeError):
        pg.gemm(a, b, out=np.empty((3, 3), np.float32), verify="raise")
    frozen = np.zeros((24, 20), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(pg.ArgumentError, match="out"):
        pg.gemm(a, b, out=frozen, verify="raise")


def test_warn_warns_and_returns_the_result(rng):
    a, b = _ops(rng)
    out = np.zeros((24, 20), np.float32)
    with inject_fault(5, 6, value=123.0):
        with pytest.warns(pg.VerificationWarning, match=r"rows 5.*returned all the same"):
            got = pg.gemm(a, b, out=out, verify="warn")
    assert got is out and out[5, 6] == np.float32(123.0)
    assert issubclass(pg.VerificationWarning, Warning)
    # last_plan() says the product it describes failed its check (a passed one says it passed)
    assert any("the check failed (1 row off" in n and "handed back" in n for n in pg.last_plan().notes)


def test_retry_recomputes_once_and_returns_a_good_result(rng, caplog):
    a, b = _ops(rng)
    with inject_fault(1, 2, value=1e3, times=1) as fault:
        with caplog.at_level(logging.WARNING, logger="polygemm"):
            got = pg.gemm(a, b, verify="retry")
    assert fault.hits == 1
    pg.testing.assert_close(got, a, b)
    assert "recomputed with variant 'reference'" in caplog.text  # the cpu's other rung: the float64 reference
    plan = pg.last_plan()  # describes the product handed back, and why that variant ran
    assert plan.variant == "reference" and "variant 'blas' failed its check" in plan.notes[-1]
    assert plan.reason.startswith("verify='retry' ran it") and "requested" not in plan.reason  # the caller asked auto
    pg.gemm(a, b)
    assert not any("failed its check" in n for n in pg.last_plan().notes)
    assert "verify='retry'" not in pg.explain(a, b, variant="reference").reason  # the cached plan is not changed


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float16])
def test_a_small_alpha_brings_a_product_past_float32s_range_back_into_it(caplog, dtype):
    # the BLAS sums in float32 and scales by alpha after: 2e38 + 2e38 overflows there, alpha·A·B does not
    big = 2e38 if dtype != np.float16 else 6e4
    a, b = np.full((1, 2), big, dtype), np.ones((2, 1), dtype)
    with caplog.at_level(logging.WARNING, logger="polygemm"):
        got = pg.gemm(a, b, alpha=0.5, device="cpu", verify="raise")
    assert got[0, 0] == dtype(big) and "verify" not in caplog.text
    assert pg.last_plan().variant in ("blas", "numpy")


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_a_scaled_product_and_c_that_cancel_past_float32s_range_give_the_references_value(dtype):
    # alpha·A·B (-4e38) and beta·c (6e38) overflow float32 apiece; their sum (2e38) fits, as the reference gives it
    a, b, c = np.full((1, 1), 2e19, dtype), np.full((1, 1), -1e19, dtype), np.full((1, 1), 3e38, dtype)
    want = pg.gemm(a, b, c, alpha=2, beta=2, device="cpu", variant="reference")
    assert np.isfinite(want).all()
    assert pg.gemm(a, b, c, alpha=2, beta=2, device="cpu", verify="raise")[0, 0] == want[0, 0]
    assert pg.gemm(a, -b, -c, alpha=2, device="cpu")[0, 0] == dtype(1e38)  # A·B·2 past the range, c brings it back


def test_retry_raises_when_the_second_attempt_fails_too(rng):
    a, b = _ops(rng)
    with inject_fault(1, 2, value=1e3) as fault:
        with pytest.raises(pg.VerificationError) as exc:
            pg.gemm(a, b, verify="retry")
    assert fault.hits == 2
    assert "first attempt" in str(exc.value) and "retried" in str(exc.value)


def test_the_process_default_and_a_calls_own_value(rng):
    a, b = _ops(rng)
    assert pg.get_verify() == "off"
    pg.set_verify("raise")
    assert pg.get_verify() == "raise"
    with inject_fault(0, 1, value=1e5):
        with pytest.raises(pg.VerificationError):
            pg.gemm(a, b)
        with pytest.raises(pg.VerificationError):
            pg.matmul(a, b)
        pg.gemm(a, b, verify="off")  # the call's own value wins
    pg.set_verify("off")
    assert pg.get_verify() == "off"
    with inject_fault(0, 1, value=1e5):
        pg.gemm(a, b)  # no check, so no fault either


def test_environment_default_and_a_bad_environment_value():
    code = ("import numpy as np, polygemm as pg\nfrom polygemm.testing import inject_fault\n"
            "print(pg.get_verify())\na = np.ones((4, 4), np.float32)\n"
            "with inject_fault(0, 0, value=99.0):\n"
            "    try:\n        pg.gemm(a, a)\n    except pg.VerificationError:\n        print('caught')\n")
    env = dict(os.environ, POLYGEMM_VERIFY="raise")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.stdout.split() == ["raise", "caught"], run.stderr
    env["POLYGEMM_VERIFY"] = "sometimes"
    run = subprocess.run([sys.executable, "-c", "import polygemm as pg; print(pg.get_verify())"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "off" and "POLYGEMM_VERIFY" in run.stderr and "'retry'" in run.stderr and "None" not in run.stderr
    for flag, mode in (("1", "raise"), ("True", "raise"), ("on", "raise"), ("0", "off"), ("false", "off"), ("NO", "off")):  # switches
        env["POLYGEMM_VERIFY"] = flag
        run = subprocess.run([sys.executable, "-c", "import polygemm as pg; print(pg.get_verify())"], env=env,
                             capture_output=True, text=True, timeout=120)
        assert run.stdout.strip() == mode and not run.stderr, (flag, run.stderr)


def test_explain_describes_the_check_and_its_cost(rng):
    a, b = _ops(rng)
    plain = pg.explain(a, b)
    assert not any("verify" in n for n in plain.notes)
    note = [n for n in pg.explain(a, b, verify="retry").notes if n.startswith("verify=")]
    assert len(note) == 1 and "Freivalds" in note[0] and "estimated cost" in note[0] and "recomputes" in note[0]
    note = [n for n in pg.explain(a, b, out=np.empty((24, 20), np.float32), verify="raise").notes if "verify" in n][0]
    assert "untouched" in note


def _check_note(plan):
    return [n for n in plan.notes if n.startswith("verify=")][0]


_UNITS = {"µs": 1.0, "ms": 1e3, "s": 1e6}


def _priced(note):
    """(the host check's µs, the product's µs) as the note estimates them."""
    found = re.search(r"roughly ([\d.]+) (µs|ms|s) on the host \(about .*? the product's roughly ([\d.]+) (µs|ms|s)\)", note)
    assert found, note
    return float(found[1]) * _UNITS[found[2]], float(found[3]) * _UNITS[found[4]]


@pytest.mark.parametrize("dtype, small_share", [(np.float32, (1.0, 10.0)), (np.float16, (0.3, 3.0))],
                         ids=["float32", "float16"])
def test_explain_prices_a_host_check_by_what_it_reads_beside_the_product(monkeypatch, dtype, small_share):
    """A host check reads and widens A, B and C once more and adds a fixed cost: on a 2-thread BLAS that is more than a
    256³ float32 product takes (1.2% of its arithmetic is no 1.2% of its time; float16's product widens its operands too,
    and takes longer) and a few tenths of a 2048³ one; the note says so in µs or ms, to two digits at most."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    small = np.zeros((256, 256), dtype)
    check, product = _priced(_check_note(pg.explain(small, small, device="cpu", verify="raise")))
    assert small_share[0] * product < check < small_share[1] * product and 100 < check < 1000
    big = np.zeros((2048, 2048), dtype)
    note = _check_note(pg.explain(big, big, device="cpu", verify="raise"))
    check, product = _priced(note)
    assert 0.02 * product < check < 0.5 * product and "% of the product's roughly" in note and "ms on the host" in note
    for number in note.split("roughly ")[1:]:
        assert re.fullmatch(r"\d(\.\d)?|\d\d|\d\d0", number.split(" ")[0]), note


def test_explain_says_a_k0_result_is_checked_and_an_empty_one_has_nothing_to_check():
    f = np.float32
    note = _check_note(pg.explain(np.ones((3, 0), f), np.ones((0, 3), f), verify="raise"))
    assert "K = 0" in note and "all zeros" in note and "tests it all the same" in note
    assert "no product to check" not in note
    note = _check_note(pg.explain(np.ones((3, 0), f), np.ones((0, 3), f), np.ones((3, 3), f), verify="raise"))
    assert "K = 0" in note and "beta·c" in note
    with inject_fault(0, 0, value=1.0):  # what the note says: K = 0 is checked
        with pytest.raises(pg.VerificationError):
            pg.gemm(np.ones((3, 0), f), np.ones((0, 2), f), verify="raise")
    for a, b, words in ((np.ones((0, 4), f), np.ones((4, 3), f), "M is 0"), (np.ones((3, 4), f), np.ones((4, 0), f), "N is 0"),
                        (np.ones((0, 0), f), np.ones((0, 0), f), "M and N are 0")):
        note = _check_note(pg.explain(a, b, verify="warn"))
        assert note == f"verify='warn': nothing to check: {words}, so the result is empty"


@pytest.mark.parametrize("given, kept", [((), None), (("out",), "out"), (("c",), "c"), (("out", "c"), "out and c"),
                                         (("in place",), "out and c")])
def test_explain_names_only_what_a_failed_check_leaves_untouched(rng, given, kept):
    a, b = _ops(rng)
    c = rng.standard_normal((24, 20)).astype(np.float32)
    out = c if "in place" in given else np.empty((24, 20), np.float32) if "out" in given else None
    note = _check_note(pg.explain(a, b, c if ("c" in given or "in place" in given) else None, out=out, verify="raise"))
    if kept is None:
        assert "untouched" not in note
    else:
        assert f"({kept} untouched on failure)" in note if out is not None else note.endswith(f"; {kept} is untouched on failure")
        if kept == "out":
            assert " c " not in note.split("copied into out")[1]


def test_a_bad_environment_value_does_not_break_import_under_warnings_as_errors():
    env = dict(os.environ, POLYGEMM_VERIFY="bogus")
    run = subprocess.run([sys.executable, "-W", "error", "-c", "import polygemm as pg; print(pg.get_verify())"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "off", run.stderr
    assert "POLYGEMM_VERIFY='bogus' is not a verification mode" in run.stderr and "'retry'" in run.stderr
    # a warning shown as Python shows it names the line that imported polygemm, not polygemm's own
    run = subprocess.run([sys.executable, "-c", "import polygemm"], env=env, capture_output=True, text=True, timeout=120)
    assert run.stderr.startswith("<string>:1: RuntimeWarning: POLYGEMM_VERIFY='bogus'"), run.stderr


def test_matmul_checks_vector_products(rng):
    a = rng.standard_normal((9, 7)).astype(np.float32)
    v = rng.standard_normal(7).astype(np.float32)
    got = pg.matmul(a, v, verify="raise")
    assert got.shape == (9,)
    with inject_fault(3, 0, value=1e4):
        with pytest.raises(pg.VerificationError):
            pg.matmul(a, v, verify="raise")


def test_an_unverified_call_takes_no_verification_path(rng, monkeypatch):
    a, b = _ops(rng)

    def refuse(*args, **kw):
        raise AssertionError("verification ran for an unverified call")

    monkeypatch.setattr(api, "verified_gemm", refuse)
    pg.gemm(a, b)
    pg.gemm(a, b, verify="off")
    pg.matmul(a, b)


def test_inject_fault_refusals(rng):
    with pytest.raises(pg.ArgumentError, match="value= .* or bit="):
        with inject_fault(0, 0):
            pass
    with pytest.raises(pg.ArgumentError, match="times"):
        with inject_fault(0, 0, value=1.0, times=0):
            pass
    a, b = _ops(rng)
    with inject_fault(100, 0, value=1.0, times=1) as fault:
        with pytest.raises(IndexError, match="outside the result") as info:
            pg.gemm(a, b, verify="raise")
        assert isinstance(info.value, pg.ArgumentError)  # a user's misuse, a ValueError as the rest of it is
        assert fault.hits == 0  # nothing was corrupted: the fault is still due on the next product
        with pytest.raises(IndexError, match="outside the result"):
            pg.gemm(a, b, verify="raise")


def test_a_fault_that_leaves_its_element_as_it_was_is_not_counted_and_stays_due():
    """hits counts the products corrupted: a value the element holds already (a NaN over a NaN among them) changes
    nothing, so the product passes its check, the fault counts no hit and corrupts the next product it changes."""
    ones = np.ones((3, 3))
    with inject_fault(0, 0, value=3.0, times=1) as fault:
        assert pg.gemm(ones, ones, verify="raise")[0, 0] == 3.0 and fault.hits == 0
        with pytest.raises(pg.VerificationError, match="rows 0"):
            pg.gemm(2 * ones, ones, verify="raise")  # 6 where the fault sets 3: corrupted, counted
        assert fault.hits == 1
        assert pg.gemm(2 * ones, ones, verify="raise")[0, 0] == 6.0  # times=1: spent
    nan_row = ones.copy()
    nan_row[0, 0] = np.nan
    with inject_fault(0, 1, value=float("nan")) as fault:
        assert np.isnan(pg.gemm(nan_row, ones, verify="raise")[0]).all() and fault.hits == 0
    z = np.full((2, 2), complex(np.nan, np.nan))
    with inject_fault(0, 0, value=complex(np.nan, 5)) as fault:  # a complex element: changed where either part is
        got = pg.gemm(z, z, verify="raise")  # (its operands' NaN leaves every row and column unchecked)
    assert fault.hits == 1 and got[0, 0].imag == 5


def test_a_complex_fault_value_reaches_the_imaginary_part_and_is_caught(rng):
    a = (rng.standard_normal((5, 4)) + 1j * rng.standard_normal((5, 4))).astype(np.complex64)
    with pytest.raises(pg.VerificationError):
        with inject_fault(1, 2, value=1e3j) as fault:
            pg.gemm(a, a.T, verify="raise")
    assert fault.hits == 1 and fault.value == 1e3j


@pytest.mark.parametrize("dtype, value, words", [(np.int64, 3.5, "pass an integer"), (np.int8, 1e30, "from -128 to 127"),
                                                 (np.int32, float("nan"), "pass an integer"), (np.float32, 2j, "imaginary part"),
                                                 (np.bool_, 7, "0 or 1")])
def test_a_fault_value_the_result_cannot_hold_as_given_is_refused_and_out_untouched(dtype, value, words):
    # 3.5 in an int64 result would be stored as 3: a fault that may inject nothing must not pass silently
    a, b = np.ones((2, 3), dtype), np.ones((3, 2), dtype)
    out = np.full((2, 2), 5).astype(dtype)
    before = out.copy()
    with inject_fault(0, 0, value=value):
        with pytest.raises(pg.ArgumentError, match=words):
            pg.gemm(a, b, out=out, verify="raise")
    np.testing.assert_array_equal(out, before)


def test_an_integer_fault_value_that_fits_is_injected_and_caught():
    a, b = np.ones((2, 3), np.int64), np.ones((3, 2), np.int64)
    with inject_fault(0, 0, value=7.0) as fault:
        with pytest.raises(pg.VerificationError):
            pg.gemm(a, b, verify="raise")
    assert fault.hits == 1


def test_inject_fault_stores_an_integer_as_given_and_refuses_fractional_indices():
    a, b = np.arange(12, dtype=np.int64).reshape(3, 4), np.ones((4, 2), np.int64)
    with inject_fault(1, 1, value=2**53 + 1):  # float() would store 2**53
        with pytest.warns(pg.VerificationWarning):
            got = pg.gemm(a, b, device="cpu", verify="warn")
    assert int(got[1, 1]) == 2**53 + 1
    for bad in (dict(row=1.7, col=0), dict(row=0, col=0, times=1.5), dict(row=0, col=0, batch=(0.5,))):
        with pytest.raises(pg.ArgumentTypeError, match="whole number"):
            with inject_fault(value=1.0, **bad):
                pass
    with pytest.raises(pg.ArgumentError, match="bit=-1"):
        with inject_fault(0, 0, bit=-1):
            pass


@pytest.mark.parametrize("bad, words", [(dict(batch=1), "batch=1 is not a sequence of whole numbers"),
                                        (dict(batch="01"), "batch='01' is not a sequence"),
                                        (dict(value="abc"), "value='abc' is a string"),
                                        (dict(value="2"), "value='2' is a string"),
                                        (dict(value=[2.0]), r"value=\[2.0\] is not a number")])
def test_inject_fault_refuses_a_batch_that_is_no_sequence_and_a_value_that_is_no_number(bad, words):
    kw = {"value": 1.0, **bad}
    with pytest.raises(pg.ArgumentTypeError, match=words):
        with inject_fault(0, 0, **kw):
            pass


def test_a_fault_refused_by_the_result_leaves_the_others_due(rng):
    """Two faults, the first outside the result: the product raises, and neither counts a hit (the second was never
    applied), so both are still due on the next product."""
    a, b = _ops(rng)
    with inject_fault(100, 0, value=1.0, times=1) as outside, inject_fault(1, 1, value=1e3, times=1) as inside:
        with pytest.raises(IndexError, match="outside the result"):
            pg.gemm(a, b, verify="raise")
        assert (outside.hits, inside.hits) == (0, 0)


def test_another_threads_fault_that_a_product_cannot_take_passes_it_over(rng):
    """Faults apply to every thread's verified calls; one that does not fit another thread's product (its element
    outside that result) passes it over, uncounted, rather than failing that call with inject_fault's error."""
    import threading

    small = rng.standard_normal((2, 2))
    big = rng.standard_normal((8, 8))
    inside, results = threading.Event(), {}

    def other():
        inside.wait(5)
        try:
            results["small"] = pg.gemm(small, small, verify="raise")
        except Exception as exc:  # the failure the test looks for
            results["small"] = exc

    t = threading.Thread(target=other)
    t.start()
    with inject_fault(3, 5, value=1e3) as fault:
        inside.set()
        t.join(10)
        with pytest.raises(pg.VerificationError):
            pg.gemm(big, big, verify="raise")
    assert isinstance(results["small"], np.ndarray) and np.allclose(results["small"], small @ small)
    assert fault.hits == 1  # the big product only


def test_another_threads_product_never_holds_a_fault_it_cannot_take_even_for_a_moment(rng):
    """A fault of times=1 whose element lies outside another thread's result is not reserved by that thread's product
    (reserved and given back, it would let its own thread's product pass it by in between): the other thread's product
    counts nothing, and the owner's next product takes the fault."""
    import threading

    from polygemm.verification import faults

    small = rng.standard_normal((2, 2))
    big = rng.standard_normal((8, 8))
    with inject_fault(5, 5, value=1e3, times=1) as fault:
        seen = {}
        t = threading.Thread(target=lambda: seen.setdefault("due", faults._due((2, 2))))
        t.start()
        t.join(10)
        assert seen["due"] == [] and fault.hits == 0  # nothing reserved by the other thread's small result
        with pytest.raises(IndexError, match="outside the result"):  # this thread's own: told of it
            pg.gemm(small, small, verify="raise")
    with inject_fault(5, 5, value=1e3, times=1) as fault:
        with pytest.raises(pg.VerificationError):
            pg.gemm(big, big, verify="raise")
        assert fault.hits == 1


def test_a_call_asking_medium_of_a_path_as_accurate_as_sgemm_is_held_to_that_paths_bound(rng):
    """The cpu backend computes float32 as it is whatever precision is asked: its products are checked against
    float32's bound, not the looser bound "medium" allows, so a fault well above float32's rounding is caught."""
    a = rng.standard_normal((64, 64)).astype(np.float32)
    plan = pg.explain(a, a, device="cpu", precision="medium")
    assert plan.computed_precision == "highest"
    exact = pg.gemm(a, a, device="cpu")
    with inject_fault(3, 3, value=float(exact[3, 3]) + 0.5):
        with pytest.raises(pg.VerificationError, match="rows 3"):
            pg.gemm(a, a, device="cpu", verify="raise", precision="medium")


def test_a_fault_value_of_no_imaginary_part_is_stored_in_a_real_result(rng):
    a, b = _ops(rng)
    with inject_fault(1, 1, value=1e4 + 0j), pytest.raises(pg.VerificationError):
        pg.gemm(a, b, verify="raise")
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    with inject_fault(0, 0, value=1e3 + 0j), pytest.raises(pg.VerificationError, match="off by"):
        pg.gemm(ints, ints.T, verify="raise")


def test_explain_of_warn_with_out_says_a_failed_product_is_handed_over(rng):
    a, b = _ops(rng)
    out = np.empty((24, 20), np.float32)
    note = _check_note(pg.explain(a, b, out=out, verify="warn"))
    assert "untouched" not in note and "out then holds the product that failed" in note
    with inject_fault(2, 3, value=1e4), pytest.warns(pg.VerificationWarning):
        pg.gemm(a, b, out=out, verify="warn")
    assert out[2, 3] == 1e4  # as the note says


def test_last_plan_keeps_the_call_before_a_verified_call_that_raised_anything(rng):
    a, b = _ops(rng)
    pg.gemm(a[:3], b)
    before = pg.last_plan()
    with inject_fault(100, 1, value=1.0), pytest.raises(IndexError):
        pg.gemm(a, b, verify="raise")
    assert pg.last_plan().problem.m == before.problem.m == 3
    import warnings

    with inject_fault(0, 0, value=1e4), warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(pg.VerificationWarning):
            pg.gemm(a, b, verify="warn")
    assert pg.last_plan().problem.m == 3


def test_set_verify_names_its_own_argument():
    with pytest.raises(pg.ArgumentError, match=r"^mode='yes' is not a verification mode"):
        pg.set_verify("yes")
    with pytest.raises(TypeError, match=r"^mode must be None, a bool or a string"):
        pg.set_verify(1)


def test_a_bool_reads_as_a_flag(rng):
    """verify=True checks and raises, as "raise" does; verify=False checks nothing, even under a process default."""
    a, b = _ops(rng)
    with inject_fault(0, 0, value=1e4), pytest.raises(pg.VerificationError):
        pg.gemm(a, b, verify=True)
    with inject_fault(0, 0, value=1e4), pytest.raises(pg.VerificationError):
        pg.matmul(a, b, verify=np.True_)
    try:
        pg.set_verify(True)
        assert pg.get_verify() == "raise"
        with inject_fault(0, 0, value=1e4):
            got = pg.gemm(a, b, verify=False)  # no check, so no fault either
        np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    finally:
        pg.set_verify(None)
    assert "verify='raise'" in "\n".join(pg.explain(a, b, verify=True).notes)
    with pytest.raises(TypeError, match=r"verify must be None, a bool or a string.*True \(as 'raise'\)"):
        pg.gemm(a, b, verify=1)


def test_one_failed_row_or_column_is_said_in_the_singular(rng, caplog):
    a, b = _ops(rng)
    with inject_fault(4, 4, value=1e4, times=1):
        pg.gemm(a, b, verify="retry")
    assert "(1 row off)" in pg.last_plan().notes[-1]


@pytest.mark.parametrize("mode", ["raise", "warn"])
def test_last_plan_of_a_verified_call_with_out_describes_that_call(rng, mode):
    """A verified call with out on the host computes into a result of its own: last_plan() still describes the call
    made (its out among the layouts, as explain says) and notes the copy into out."""
    a = rng.standard_normal((5, 4)).astype(np.float32)
    out = np.empty((5, 5), np.float32, order="F")
    want = pg.explain(a, a.T, out=out, device="cpu", verify=mode)
    pg.gemm(a, a.T, out=out, device="cpu", verify=mode)
    plan = pg.last_plan()
    assert plan.layouts == want.layouts and "out" in plan.layouts and plan.problem.out is not None
    assert any("copied into out" in n for n in plan.notes), plan.notes
    pg.gemm(a, a.T, device="cpu", verify=mode)  # without out: the product's own plan
    assert "out" not in pg.last_plan().layouts


@pytest.mark.parametrize("mode", ["raise", "warn", "retry"])
def test_last_plan_says_a_check_passed_with_or_without_out(rng, mode):
    a = rng.standard_normal((5, 4)).astype(np.float32)
    for out in (None, np.empty((5, 5), np.float32)):
        pg.gemm(a, a.T, out=out, verify=mode, device="cpu")
        notes = pg.last_plan().notes
        assert any(n.startswith(f"verify={mode!r}: checked on the host, passed (5 rows") for n in notes), notes
    pg.gemm(a, a.T, device="cpu")
    assert not any("checked on" in n for n in pg.last_plan().notes)  # an unverified call says nothing of a check


@pytest.mark.parametrize("a_shape, b_shape", [((10**10, 0), (0, 0)), ((0, 0), (0, 10**10)), ((0, 10**9, 0), (0, 3))])
def test_an_empty_result_has_nothing_to_check_and_costs_no_work_of_its_size(a_shape, b_shape):
    # M or N of ten billion with an empty result: the check's vectors would be of that size (tens of GiB)
    a, b = np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32)
    for mode in ("raise", "retry"):
        got = pg.gemm(a, b, verify=mode)
        assert got.size == 0 and got.shape == np.matmul(a, b).shape
