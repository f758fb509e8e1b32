"""Fixtures every test may ask for: fresh random data (its seed printed), registry isolation, the view of a
machine without a GPU, the MUSA library built once, tools/update_tuning.py as a module. The autouse fixtures
of the test files they came from hold for every test: each starts with an empty plan cache and no
$POLYGEMM_DEVICE. And the end of a run's summary: one line per skip reason, with its count."""

from __future__ import annotations

import os
import secrets
import sys

# One BLAS thread per test process, set before NumPy loads OpenBLAS (children inherit it): the suite's products are
# small, and pytest-xdist already gives every core a worker, so OpenBLAS's pool of spinning threads would only
# contend with the other workers (on a 2-core machine a cpu benchmark takes several times as long with it). A value the
# caller set is kept.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# The tests assert what polygemm chooses and checks by its own rules: a tuning cache this machine's runs left, or a
# process default the caller's shell sets (read when polygemm is imported), would change that. The tests of those
# settings set them themselves.
os.environ["POLYGEMM_TUNE_CACHE"] = "0"
for _var in ("POLYGEMM_AUTOTUNE", "POLYGEMM_RECORD_SHAPES", "POLYGEMM_VERIFY", "POLYGEMM_PRECISION"):
    os.environ.pop(_var, None)

import numpy as np
import pytest

import polygemm as pg
import polygemm.registry as registry
from polygemm import api

from tests.helpers import cannot_create_in, musa, musa_library, tool_module  # noqa: F401  (musa fixtures: every test may ask for them)
from tests.plugin_sources import (BROKEN_IMPORT, BROKEN_PLUGINS, DOC_PLUGIN, FAST_PLUGIN, RULE_BENDING_CLASSES,
                                  RULE_BENDING_PLUGIN, install_fake_plugins)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    seed = secrets.randbits(32)
    request.node.user_properties.append(("seed", seed))
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch):
    """Rediscover backends for the test and again afterwards (plugins on sys.path change)."""
    registry.refresh()
    yield registry
    registry.refresh()


@pytest.fixture
def without_gpu():
    """The registry as a machine without a GPU sees it (cuda unavailable), for a test of what such
    a machine's user gets that would otherwise run on a GPU machine's cuda backend; rediscovered
    afterwards."""
    from polygemm.backends.cuda import CudaBackend

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(CudaBackend, "probe", lambda self: pg.Availability(False, "no GPU (hidden by the test)"))
        registry.refresh()
        yield registry
    registry.refresh()


@pytest.fixture(scope="session")
def update_tuning():
    """tools/update_tuning.py as a module (a script, not part of the package)."""
    return tool_module("update_tuning")


@pytest.fixture(autouse=True)
def empty_cache():
    api.clear_plan_cache()
    yield
    api.clear_plan_cache()


@pytest.fixture(autouse=True)
def _no_device_env(monkeypatch):
    monkeypatch.delenv("POLYGEMM_DEVICE", raising=False)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per distinct skip reason with its count (addopts has -rfE, not -ra): a machine
    without a GPU skips every cuda test for one reason, which is one line here, not a thousand."""
    reasons: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    n_reasons = f"{len(reasons)} reason" + ("s" if len(reasons) > 1 else "")
    terminalreporter.write_sep("=", f"{sum(reasons.values())} skipped, {n_reasons}")
    for reason, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f"{n:6d}  {reason}")


@pytest.fixture
def plugins(tmp_path, monkeypatch, fresh_registry):
    eps = {c.lower(): f"pg_rule_bending_plugin:{c}" for c in RULE_BENDING_CLASSES}
    eps.update({"one": "pg_rule_bending_plugin:SHARED", "two": "pg_rule_bending_plugin:SHARED"})
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry, ("pg-rule-bending", "pg_rule_bending_plugin", RULE_BENDING_PLUGIN, eps))
    yield
    sys.modules.pop("pg_rule_bending_plugin", None)


@pytest.fixture
def broken(tmp_path, monkeypatch, fresh_registry):
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         *((f"pg_{n}", f"pg_{n}_plugin", src, {n: f"pg_{n}_plugin:{attr}"}) for n, (src, attr) in BROKEN_PLUGINS.items()),
                         ("pg_nomod", "pg_nomod_plugin", "x = 1\n", {"nomod": "pg_nomod_no_such_module:B"}))
    yield tmp_path
    for n in [*BROKEN_PLUGINS, "nomod"]:
        sys.modules.pop(f"pg_{n}_plugin", None)


@pytest.fixture
def doc_plugin(tmp_path, monkeypatch, fresh_registry):
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("polygemm_mydev", "polygemm_mydev", DOC_PLUGIN, {"mydev": "polygemm_mydev:MyDevBackend"}),
                         ("polygemm_fast", "polygemm_fast", FAST_PLUGIN, {"fast": "polygemm_fast:FastBackend"}),
                         ("polygemm_broke", "polygemm_broke", BROKEN_IMPORT, {"broke": "polygemm_broke:Broke"}))
    yield tmp_path
    for mod in ("polygemm_mydev", "polygemm_fast", "polygemm_broke"):
        sys.modules.pop(mod, None)


@pytest.fixture
def no_file_folder(monkeypatch):
    """/proc: a folder on every Linux where no file can be made, which os.access calls writable for root (and, here,
    for any user: its answer for root is given whoever runs the tests)."""
    assert os.path.isdir("/proc") and cannot_create_in("/proc")
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: True if str(path).startswith("/proc")
                        else access(path, mode, *a, **k))
    return "/proc"


@pytest.fixture
def ops(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    return a, b
