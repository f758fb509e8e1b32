"""On/off environment variables (registry.env_flag) and POLYGEMM_TEST_QUICK."""

from __future__ import annotations

import pytest

from polygemm.errors import ArgumentError, PolygemmError
from polygemm.registry import env_flag

from tests.helpers import run_conformance_suites


VAR = "POLYGEMM_TEST_FLAG_X"


def _params(monkeypatch, quick: str | None) -> list:
    import polygemm.testing.test_conformance as suite

    for name in ("POLYGEMM_TEST_DTYPES", "POLYGEMM_TEST_VARIANTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(suite, "BACKEND", "cpu")
    if quick is None:
        monkeypatch.delenv("POLYGEMM_TEST_QUICK", raising=False)
    else:
        monkeypatch.setenv("POLYGEMM_TEST_QUICK", quick)
    return suite._params()



@pytest.mark.parametrize("value", ["1", "true", "TRUE", "True", "yes", "Yes", "on", "ON", " on ", "1\n"])
def test_on_spellings(monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    assert env_flag(VAR) is True and env_flag(VAR, default=True) is True


@pytest.mark.parametrize("value", ["0", "false", "False", "no", "NO", "off", "Off", "", "  "])
def test_off_spellings(monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    assert env_flag(VAR) is False and env_flag(VAR, default=True) is False


def test_unset_is_the_default(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    assert env_flag(VAR) is False and env_flag(VAR, default=True) is True


@pytest.mark.parametrize("value", ["2", "maybe", "y", "n", "enabled", "1.0", "-1", "t"])
def test_other_values_are_refused_naming_the_variable_and_the_spellings(monkeypatch, value):
    monkeypatch.setenv(VAR, value)
    with pytest.raises(ArgumentError) as exc:
        env_flag(VAR)
    text = str(exc.value)
    assert text.startswith(f"{VAR}={value!r} is not an on/off value")
    assert "1, true, yes, on (on)" in text and "0, false, no, off or empty (off)" in text
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, PolygemmError)


def test_the_suite_takes_every_spelling_of_quick(monkeypatch):
    quick, full = len(_params(monkeypatch, "1")), len(_params(monkeypatch, None))
    assert 0 < quick < full
    for value in ("true", "Yes", "ON"):  # each quick, as "1" is
        assert len(_params(monkeypatch, value)) == quick, value
    for value in ("0", "false", "no", "Off", ""):
        assert len(_params(monkeypatch, value)) == full, value


def test_the_suite_fails_on_a_misspelt_quick(tmp_path):
    # "POLYGEMM_TEST_QUICK=ture" is one failing test that says why, not the full grid, also where the backend is
    # unavailable (that would otherwise be one skip)
    backends = ("cpu", "cuda")
    runs = run_conformance_suites(tmp_path, [{"POLYGEMM_TEST_BACKEND": backend, "POLYGEMM_TEST_QUICK": "ture"}
                                             for backend in backends], args=("-q", "-p", "no:cacheprovider", "--pyargs",
                                                                             "polygemm.testing"))
    for backend, r in zip(backends, runs):
        assert r.returncode == 1 and "1 failed" in r.stdout and "passed" not in r.stdout, r.stdout[-2000:]
        assert "POLYGEMM_TEST_QUICK='ture' is not an on/off value" in r.stdout, r.stdout[-2000:]
