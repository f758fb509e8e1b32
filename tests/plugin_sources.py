"""Plugins written to a temporary folder for the registry to discover: the Python source of a
small backend, and the .dist-info that registers it, shared by the tests that need one
(tests/registry/ and tests/plugins/).

``one_variant_backend`` is the one template: a host backend with one float32 variant whose
``plan`` resolves ``"auto"`` to it and checks the problem, and whose ``run`` either computes the
product in float64 (honouring alpha, beta, c and out) or must never be reached. Tests append
subclasses to its source, each breaking or bending one rule of the Backend contract.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

__all__ = ["HEADER", "COMPUTES", "NEVER_RUN", "one_variant_backend", "DOUBLE_PLUGIN", "BROKEN_BASE", "THIRD_PARTY_BASE",
           "install_fake_distribution", "install_fake_plugins"]

#: the imports every template starts with
HEADER = """
import numpy as np
from polygemm.backend import Availability, Backend, Plan, Variant, host_layouts
"""

#: ``run``: alpha * a @ b (+ beta * c) in float64, rounded once; written into out when there is one
COMPUTES = """\
    def run(self, plan):
        p = plan.problem
        r = p.alpha * (p.a.array.astype(np.float64) @ p.b.array.astype(np.float64))
        if p.beta:
            r = r + p.beta * p.c.array.astype(np.float64)  # beta * a float32 array is float32 (NumPy 2)
        r = r.astype(p.out_dtype)
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r
"""

#: ``run`` of a plugin the test expects never to be run (it is broken before that)
NEVER_RUN = """\
    def run(self, plan):
        raise AssertionError("a broken plugin must never be run")
"""


def _q(text: str) -> str:
    """``text`` as a double-quoted Python string literal."""
    return json.dumps(text)


def one_variant_backend(cls: str, *, priority: int, name: str | None = None, variant: str = "v",
                        description: str = "float32 matmul", reason: str = "the only variant", run: str = COMPUTES,
                        priority_comment: str = "") -> str:
    """The source of a module defining ``class <cls>(Backend)``: available, one float32 variant
    named ``variant``, ``run`` as given (COMPUTES or NEVER_RUN). ``name`` sets the class's own
    name attribute (the registry names a plugin after its entry point either way)."""
    body = [f"class {cls}(Backend):"]
    if name is not None:
        body.append(f"    name = {_q(name)}")
    body.append(f"    priority = {priority}" + (f"  # {priority_comment}" if priority_comment else ""))
    body.append(f'''\
    def probe(self):
        return Availability(True)
    def variants(self):
        return (Variant({_q(variant)}, ("float32",), {_q(description)}),)
    def plan(self, problem, variant="auto"):
        v = self.get_variant({_q(variant)} if variant == "auto" else variant)
        self.check_problem(problem, v)
        return Plan(self.name, v.name, {_q(reason)}, problem, layouts=host_layouts(problem))''')
    return HEADER + "\n" + "\n".join(body) + "\n" + run


#: a plugin computing float32 products through float64: class DoubleBackend, name "double"
DOUBLE_PLUGIN = one_variant_backend("DoubleBackend", name="double", priority=350, variant="matmul64",
                                    description="float64 matmul rounded to float32", reason="the plugin's one variant")
#: class Base, for plugins that break a rule before they could run (tests/plugins/test_broken_plugins.py)
BROKEN_BASE = one_variant_backend("Base", priority=450, run=NEVER_RUN,
                                  priority_comment="above musa and plugins: auto meets it before cpu")
#: class Good, a third party's plugin that keeps the contract (tests/plugins/ subclasses it)
THIRD_PARTY_BASE = one_variant_backend("Good", priority=300)


def install_fake_distribution(root: Path, dist: str, module: str, source: str, entry_points: dict[str, str]) -> None:
    """Write a module and a minimal .dist-info with entry points under ``root``."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    # the folder's name as pip writes it (a hyphen in the name becomes "_": importlib.metadata reads
    # the text before the first hyphen as the distribution's name)
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[polygemm.backends]\n{lines}\n")


def install_fake_plugins(root: Path, monkeypatch: pytest.MonkeyPatch, registry: object,
                         *dists: tuple[str, str, str, dict[str, str]]) -> None:
    """Install each (dist, module, source, entry points) under ``root``, put ``root`` on the
    import path and let ``registry`` (the fresh_registry fixture) discover them."""
    for dist in dists:
        install_fake_distribution(root, *dist)
    monkeypatch.syspath_prepend(str(root))
    registry.refresh()  # type: ignore[attr-defined]
