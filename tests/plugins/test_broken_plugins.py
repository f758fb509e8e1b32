"""A plugin that breaks the Backend contract never breaks polygemm."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main

from tests.helpers import BASE, REPO_ROOT
from tests.plugin_sources import DOUBLE_PLUGIN as PLUGIN, install_fake_distribution, install_fake_plugins


BROKEN_PLUGINS = {
    "badprio": BASE + """
class B(Base):
    priority = "high"
""",
    "raisingsupports": BASE + """
class B(Base):
    def supports(self, problem):
        raise RuntimeError("supports exploded")
""",
    "stringvariants": BASE + """
class B(Base):
    def variants(self):
        return ("v1", "v2")
""",
    "sysexit": """
import sys
sys.exit(3)
""",
    "stringprobe": BASE + """
class B(Base):
    def probe(self):
        return "no device here"
""",
    "longreason": BASE + """
class B(Base):
    def probe(self):
        return Availability(False, "LONGREASON " + "tried /a/very/long/path/libfoo.so: not found; " * 12 + "\\nsecond line FULLTEXT")
""",
}


def _install(root: Path, plugins: dict[str, str]) -> None:
    for name, source in plugins.items():
        install_fake_distribution(root, f"pg_{name}", f"pg_{name}_plugin", source, {name: f"pg_{name}_plugin:B"})


@pytest.fixture
def broken(tmp_path, monkeypatch, fresh_registry):
    _install(tmp_path, BROKEN_PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    yield tmp_path
    for name in BROKEN_PLUGINS:
        sys.modules.pop(f"pg_{name}_plugin", None)


def _infos():
    return {i.name: i for i in pg.backends()}


IMPOSTOR = BASE + """
class B(Base):
    priority = 0
    def run(self, plan):
        return np.zeros((plan.problem.m, plan.problem.n), np.float32)
"""


ROOT = REPO_ROOT


REENTRANT = BASE + """
import polygemm
SEEN = []
class B(Base):
    def probe(self):
        SEEN.append({i.name: (i.available, i.reason) for i in polygemm.backends()})
        return Availability(True)
"""


DRIVER = """
import time, numpy as np, polygemm as pg
t0 = time.monotonic()
infos = {i.name: i for i in pg.backends()}
a = np.ones((2, 3), np.float32)
plan = pg.explain(a, a.T)
print("PLAN", plan.backend, dict(plan.candidates).get(%(name)r, "-"))
print("INFO", infos[%(name)r].available, infos[%(name)r].reason)
print("ELAPSED", time.monotonic() - t0)
"""


def _run_driver(tmp_path: Path, name: str, source: str, env: dict[str, str] | None = None, extra: str = "") -> str:
    _install(tmp_path, {name: source})
    code = textwrap.dedent(DRIVER % {"name": name}) + extra
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"plugin {name!r}: polygemm hung (more than 60 s)")
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


HANGS = BASE + """
import threading
class B(Base):
    def probe(self):
        threading.Event().wait()  # forever
"""


def test_broken_plugins_listed_unavailable_with_reasons(broken):
    infos = _infos()
    expect = {
        "badprio": "priority must be an integer",
        "stringvariants": "variants() must return Variant objects",
        "sysexit": "import failed: SystemExit: 3",
        "stringprobe": "probe() must return an Availability; it returned str 'no device here'",
        "longreason": "LONGREASON",
    }
    for name, fragment in expect.items():
        assert not infos[name].available, name
        assert fragment in infos[name].reason, (name, infos[name].reason)
    # supports() is per problem: the plugin is available, auto passes it over (below)
    assert infos["raisingsupports"].available
    assert infos["cpu"].available


def test_auto_and_explicit_calls_survive_broken_plugins(broken, rng):
    # float64, which neither GPU backend computes: auto reaches the plugins on a machine with a
    # GPU too (with float32 it stops at cuda there, and never asks them)
    a = rng.standard_normal((4, 3))
    b = rng.standard_normal((3, 2))
    plan = pg.explain(a, b)
    assert plan.backend == "cpu"
    passed = dict(plan.candidates)
    assert "supports exploded" in passed["raisingsupports"]
    assert "priority must be an integer" in passed["badprio"]
    np.testing.assert_allclose(pg.gemm(a, b), a @ b, rtol=1e-12, atol=1e-12)
    for name in ("badprio", "stringvariants", "stringprobe", "longreason"):
        with pytest.raises(pg.BackendUnavailableError, match=f"device '{name}' is unavailable"):
            pg.gemm(a, b, device=name)
    with pytest.raises(pg.BackendUnavailableError, match="SystemExit"):
        pg.gemm(a, b, device="sysexit")


def test_cli_survives_broken_plugins(broken, capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in BROKEN_PLUGINS:
        assert name in out
    assert "priority must be an integer" in out and "SystemExit" in out
    assert max(len(line) for line in out.splitlines()) <= 120, out
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    assert "stringvariants" in out and "reference" in out


def test_reasons_are_one_short_line_and_details_keep_the_rest(broken, capsys):
    info = _infos()["longreason"]
    assert len(info.reason) <= 120 and "\n" not in info.reason
    assert "FULLTEXT" in info.detail and info.detail.count("libfoo.so") == 12
    with pytest.raises(pg.BackendUnavailableError) as exc:
        pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device="longreason")
    msg = str(exc.value)
    assert "\n" not in msg and msg.count("LONGREASON") == 1 and "FULLTEXT" not in msg
    assert "FULLTEXT" in exc.value.details
    assert main(["info", "-v"]) == 0
    assert "FULLTEXT" in capsys.readouterr().out


def test_each_reason_once_in_an_unavailable_device_message(broken):
    """device="x" says x's reason once, not again in its list of every backend's reason."""
    for info in pg.backends():
        if info.available:
            continue
        with pytest.raises(pg.BackendUnavailableError) as exc:
            pg.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), device=info.name)
        msg = str(exc.value)
        assert msg.count(info.reason) == 1, msg
        others = [i for i in pg.backends() if not i.available and i.name != info.name and len(i.reason) > 20]
        for other in others:
            assert other.reason not in msg, (other.name, msg)


def test_plugin_cannot_take_over_a_builtin_name(tmp_path, monkeypatch, fresh_registry):
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         ("pg_impostor", "pg_impostor_plugin", IMPOSTOR, {"cpu": "pg_impostor_plugin:B"}),
                         ("pg_double", "pg_double_plugin", PLUGIN, {"double": "pg_double_plugin:DoubleBackend"}),
                         ("pg_double2", "pg_double2_plugin", PLUGIN, {"double": "pg_double2_plugin:DoubleBackend"}))
    try:
        infos = _infos()
        # polygemm's own cpu: the built-in table from a checkout, its own entry point when installed
        assert infos["cpu"].available and (infos["cpu"].source.startswith("built-in") or infos["cpu"].source.endswith("(polygemm)"))
        assert "pg_impostor" not in infos["cpu"].source
        clash = [i for i in infos.values() if i.name.startswith("cpu@")]
        assert len(clash) == 1 and not clash[0].available
        assert "clashes with the built-in 'cpu'" in clash[0].reason and "pg_impostor" in clash[0].source
        assert "pg_impostor_plugin" not in sys.modules  # never imported
        a = np.ones((2, 3), np.float32)
        assert (pg.gemm(a, a.T, device="cpu") == 3.0).all()
        # two distributions, one name: the second is listed, not silently dropped
        dup = [i for i in infos.values() if i.name.startswith("double@")]
        assert infos["double"].available and len(dup) == 1 and "already taken" in dup[0].reason
    finally:
        for mod in ("pg_impostor_plugin", "pg_double_plugin", "pg_double2_plugin"):
            sys.modules.pop(mod, None)


def test_probe_calling_backends_does_not_deadlock(tmp_path):
    out = _run_driver(tmp_path, "reentrant", REENTRANT,
                      extra="import pg_reentrant_plugin as p; print('SEEN', p.SEEN[0]['reentrant'], p.SEEN[0]['cpu'][0])\n")
    assert "INFO True" in out
    # from inside its own probe, the plugin sees itself as still being probed, the others as they are
    assert "SEEN (False, 'probe still running" in out and out.rstrip().endswith("True")


def test_hanging_probe_is_bounded(tmp_path):
    out = _run_driver(tmp_path, "hangs", HANGS, env={"POLYGEMM_PROBE_TIMEOUT": "0.5"})
    assert "INFO False probe did not return within 0.5 s" in out
    assert "PLAN cpu unavailable: probe did not return within 0.5 s" in out or "PLAN cuda" in out or "PLAN musa" in out
    elapsed = float(out.split("ELAPSED")[1])
    assert elapsed < 20, out


def test_hanging_probe_in_cli_info(tmp_path):
    _install(tmp_path, {"hangs": HANGS})
    env = {**os.environ, "POLYGEMM_PROBE_TIMEOUT": "0.5",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "polygemm", "info"], capture_output=True, text=True, env=env, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("polygemm info hung on a plugin whose probe never returns")
    assert r.returncode == 0 and "probe did not return within 0.5 s" in r.stdout, r.stdout + r.stderr
    assert time.monotonic() - t0 < 30


REFUSING_PLAN = {
    # priority 900: above every backend polygemm ships, so auto asks these first on any machine
    "refusingplan": BASE + """
class B(Base):
    priority = 900
    def plan(self, problem, variant="auto"):
        from polygemm import UnsupportedProblemError
        raise UnsupportedProblemError("refusingplan takes K <= 2 only")
""",
    "raisingplan": BASE + """
class B(Base):
    priority = 901
    def plan(self, problem, variant="auto"):
        raise KeyError("no tile for this shape")
""",
}


def test_auto_passes_over_a_plugin_whose_plan_refuses_or_fails(tmp_path, monkeypatch, fresh_registry, rng, caplog):
    # supports() passed the problem (float32, host), plan() did not: auto goes on to the next backend, and the plan's
    # candidates say why; a named device raises as before
    install_fake_plugins(tmp_path, monkeypatch, fresh_registry,
                         *[(f"pg_{n}", f"pg_{n}_plugin", s, {n: f"pg_{n}_plugin:B"}) for n, s in REFUSING_PLAN.items()])
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    with caplog.at_level("WARNING", logger="polygemm"):
        plan = pg.explain(a, b)
        np.testing.assert_allclose(pg.gemm(a, b), a @ b, rtol=1e-5)
    assert plan.backend not in REFUSING_PLAN
    passed = dict(plan.candidates)
    assert "takes K <= 2 only" in passed["refusingplan"] and "no tile for this shape" in passed["raisingplan"]
    assert "raisingplan" in caplog.text and "refusingplan" not in caplog.text  # a failure is logged, a refusal not
    with pytest.raises(pg.UnsupportedProblemError, match="K <= 2"):
        pg.gemm(a, b, device="refusingplan")
    with pytest.raises(pg.DeviceError, match="no tile for this shape"):
        pg.gemm(a, b, device="raisingplan")
