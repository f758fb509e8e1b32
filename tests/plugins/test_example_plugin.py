"""The example plugin in examples/polygemm-numpy-blas: loads, registers, conforms, installs."""

from __future__ import annotations

import collections
import importlib.util
import os
import shutil
import subprocess
import sys
from configparser import ConfigParser
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.testing import assert_close, case_groups, run_conformance

from tests.helpers import REPO_ROOT


ROOT = REPO_ROOT


EXAMPLE = ROOT / "examples" / "polygemm-numpy-blas"


MODULE = "polygemm_numpy_blas"


def _forget_module() -> None:
    for name in [m for m in sys.modules if m == MODULE or m.startswith(MODULE + ".")]:
        del sys.modules[name]


@pytest.fixture
def example_on_path(monkeypatch):
    """The example package importable straight from its source folder."""
    _forget_module()
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield EXAMPLE
    _forget_module()


ENTRY_POINT = "numpy_blas = polygemm_numpy_blas:NumpyBlasBackend"


@pytest.fixture
def registered(example_on_path, tmp_path, monkeypatch, fresh_registry):
    """The example registered as an installed distribution would be (a .dist-info with its entry point)."""
    info = tmp_path / "polygemm_numpy_blas-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: polygemm-numpy-blas\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[polygemm.backends]\n{ENTRY_POINT}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry.refresh()
    return fresh_registry


def _build_tools_missing() -> str | None:
    """Why a pip install of the example cannot be attempted here, or None."""
    for mod in ("pip", "setuptools"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed"
    # read the version from metadata: importing setuptools here would patch distutils in the test process
    version = importlib.metadata.version("setuptools")
    major_minor = tuple(int(x) for x in version.split(".")[:2] if x.isdigit())
    # setuptools before 70.1 builds wheels through the separate `wheel` package
    if major_minor < (70, 1) and importlib.util.find_spec("wheel") is None:
        return f"setuptools {version} needs the 'wheel' package to build, and it is not installed"
    return None


def test_backend_class_loads_from_the_example(example_on_path):
    from polygemm_numpy_blas import NumpyBlasBackend

    assert Path(sys.modules[MODULE].__file__).resolve().is_relative_to(EXAMPLE)
    be = NumpyBlasBackend()
    assert isinstance(be, pg.Backend)
    assert (be.name, be.priority, be.residencies) == ("numpy_blas", 300, ("host",))
    assert be.probe().ok
    (v,) = be.variants()
    assert (v.name, v.dtypes, v.auto, v.vendor) == ("matmul", ("float16", "float32", "float64"), True, False)


def test_pyproject_declares_the_entry_point():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["name"] == "polygemm-numpy-blas"
    assert {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]} == {"polygemm", "numpy"}
    assert project["entry-points"]["polygemm.backends"] == {"numpy_blas": "polygemm_numpy_blas:NumpyBlasBackend"}
    assert meta["build-system"]["build-backend"] == "setuptools.build_meta"


def test_registered_plugin_is_listed_and_computes(registered, rng):
    infos = {i.name: i for i in pg.backends()}
    info = infos["numpy_blas"]
    assert info.available, info.reason
    assert info.priority == 300
    assert "polygemm-numpy-blas" in info.source
    a = rng.standard_normal((37, 23)).astype(np.float32)
    b = rng.standard_normal((23, 19)).astype(np.float32)
    c = rng.standard_normal((37, 19)).astype(np.float32)
    assert_close(pg.gemm(a, b, c, alpha=0.5, beta=2.0, device="numpy_blas"), a, b, c, 0.5, 2.0)
    assert pg.last_plan().backend == "numpy_blas" and pg.last_plan().variant == "matmul"
    # auto: the plugin outranks cpu; only a higher-priority backend that supports the problem beats it
    plan = pg.explain(a.astype(np.float64), b.astype(np.float64))
    chosen = infos[plan.backend]
    assert plan.backend == "numpy_blas" or chosen.priority > 300, str(plan)


def test_registered_plugin_errors_and_half_precision(registered, rng):
    a = rng.standard_normal((8, 5)).astype(np.float16)
    b = rng.standard_normal((5, 6)).astype(np.float16)
    plan = pg.explain(a, b, device="numpy_blas")
    assert any("float32" in c for c in plan.copies), str(plan)
    out = np.full((8, 6), np.nan, np.float16)
    assert pg.gemm(a, b, out=out, device="numpy_blas") is out
    assert_close(out, a, b)
    with pytest.raises(pg.UnsupportedProblemError, match="known: matmul"):
        pg.gemm(a, b, device="numpy_blas", variant="nosuch")


def test_registered_plugin_passes_conformance(registered):
    results = run_conformance("numpy_blas")
    fails = [r for r in results if r.status == "fail"]
    assert not fails, fails
    counts = collections.Counter(r.status for r in results)
    per_dtype = sum(len(cases) for cases in case_groups().values()) - 1  # no batch case: the example takes no batches
    assert per_dtype > 25  # the full grid, not the quick one
    # every case of all three dtypes ran; a host backend skips only the device-array case
    assert len(results) == 3 * per_dtype
    assert {(r.group, r.case) for r in results if r.status == "skip"} == {("device", "device_arrays")}
    assert counts["pass"] == 3 * (per_dtype - 1), counts


def test_pip_installs_the_example_with_its_entry_point(tmp_path):
    """pip builds and installs the example; its dist-info declares the entry point (~5 s)."""
    missing = _build_tools_missing()
    if missing:
        pytest.skip(f"cannot build the example with pip: {missing}")
    # build from a copy: pip builds in place and would leave build/ and *.egg-info in the repo
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "target"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--target", str(target), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    infos = list(target.glob("polygemm_numpy_blas-*.dist-info"))
    assert len(infos) == 1, sorted(p.name for p in target.iterdir())
    eps = ConfigParser()
    eps.read(infos[0] / "entry_points.txt")
    assert dict(eps["polygemm.backends"]) == {"numpy_blas": "polygemm_numpy_blas:NumpyBlasBackend"}
    assert (target / MODULE / "backend.py").is_file()
    # the installed copy is what a fresh interpreter discovers and runs
    code = (
        "import numpy as np, polygemm as pg\n"
        "i = {x.name: x for x in pg.backends()}['numpy_blas']\n"
        "assert i.available and i.priority == 300, i\n"
        "import polygemm_numpy_blas as m; assert m.__file__.startswith(%r), m.__file__\n"
        "a = np.arange(6.0).reshape(2, 3); print(pg.gemm(a, a.T, device='numpy_blas').tolist())\n" % str(target)
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT)]))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "[[5.0, 14.0], [14.0, 50.0]]"
