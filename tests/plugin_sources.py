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
           "install_fake_distribution", "install_fake_plugins",
           "DOC_PLUGIN", "FAST_PLUGIN", "RULE_BENDING_PLUGIN", "RULE_BENDING_CLASSES", "BROKEN_PLUGINS", "BROKEN_IMPORT"]

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


DOC_PLUGIN = '''
import numpy as np
import polygemm
from polygemm.backend import Availability, Plan, Variant, host_layouts
from polygemm.errors import DeviceError


class MyDevBackend(polygemm.Backend):
    name = "mydev"
    priority = 300
    residencies = ("host",)

    def probe(self):
        return Availability(True)

    def variants(self):
        return (
            Variant(name="matmul", dtypes=("float16", "float32", "float64"), description="numpy.matmul, float16 in float32",
                    layout="any", tile="BLAS heuristics", requirements="none", auto=True, vendor=False,
                    out_dtypes=("float32",), extra={}),
            Variant(name="vendorlib", dtypes=("float32",), description="the vendor library's GEMM", auto=False, vendor=True),
        )

    def device_name(self):
        return "MyDev 9000 (emulated)"

    def plan(self, problem, variant="auto"):
        chosen = self.get_variant("matmul" if variant == "auto" else variant)
        self.check_problem(problem, chosen)
        return Plan(self.name, chosen.name, "the doc's plugin", problem, device=self.device_name(),
                    layouts=host_layouts(problem))

    def run(self, plan):
        p = plan.problem
        work = np.dtype(np.float32 if p.dtype == np.float16 else p.dtype)
        try:
            with np.errstate(all="ignore"):
                res = np.zeros((p.m, p.n), work)
                if not p.empty:  # scaled in float64: alpha and beta may lie beyond float32's range (1e39, 1e-45)
                    res = np.matmul(p.a.array.astype(work), p.b.array.astype(work)).astype(np.float64) * p.alpha
                if p.beta != 0.0:
                    res = res + p.beta * p.c.array.astype(np.float64)
            res = res.astype(p.out_dtype)
        except MemoryError as exc:
            raise DeviceError(f"mydev: {exc}") from exc
        if p.out is not None:
            np.copyto(p.out.array, res)
            return p.out.array
        return res
'''


FAST_PLUGIN = one_variant_backend("FastBackend", priority=300, variant="mm", reason="its one variant") + """\
    def execute(self, plan, call):  # "for speed": the product only, alpha and beta forgotten
        from polygemm.backend import check_call

        if not call.matched:
            check_call(plan, call)
        with np.errstate(all="ignore"):
            r = (np.asarray(call.a) @ np.asarray(call.b)).astype(np.float32)
        if call.out is not None:
            call.out[...] = r
            return call.out
        return r
"""


RULE_BENDING_PLUGIN = THIRD_PARTY_BASE + '''
class KeepsPlans(Good):
    """Plans once per (M, N, K, dtype, variant) and returns the Plan it kept for every later problem of that shape."""
    priority = 550  # above cuda (500): the same choice on a machine with a GPU
    def __init__(self):
        self.kept = {}
    def plan(self, problem, variant="auto"):
        key = (problem.m, problem.n, problem.k, problem.dtype.name, variant)
        if key not in self.kept:
            self.kept[key] = super().plan(problem, variant)
        return self.kept[key]

class SaysTrue(Good):
    """supports() answering "is it supported?" with a bool, as the method's name reads."""
    priority = 560
    def supports(self, problem):
        return problem.dtype == np.float32

class SaysFalse(Good):
    priority = 570
    def supports(self, problem):
        return False

class IntoC(Good):
    """Accumulates into c itself when there is no out (saves an allocation; c is the caller's)."""
    def run(self, plan):
        p = plan.problem
        r = p.alpha * (p.a.array @ p.b.array)
        if p.beta:
            acc = p.c.array
            acc *= p.beta
            acc += r
            r = acc
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class ScalesA(Good):
    """Scales a in place by alpha first (the caller's a)."""
    def run(self, plan):
        p = plan.problem
        a = p.a.array
        a *= np.float32(p.alpha)
        r = a @ p.b.array
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class Peeks(Good):
    """Records what run() receives: the operands' memory and whether they can be written."""
    seen = []
    def run(self, plan):
        p = plan.problem
        type(self).seen.append({op.name: (op.array, op.array.flags.writeable) for op in p.operands()})
        return super().run(plan)

class Float32Scalars(Good):
    """Scales in float32, as a kernel with float32 scalars does: alpha=1e39 becomes Inf."""
    def run(self, plan):
        p = plan.problem
        r = (p.a.array @ p.b.array) * np.float32(p.alpha)
        if p.beta:
            r = r + np.float32(p.beta) * p.c.array
        r = r.astype(np.float32)
        if p.out is not None:
            p.out.array[...] = r
            return p.out.array
        return r

class Float32ScalarsDeclared(Float32Scalars):
    """The same kernels, declaring their float32 scalars: the core refuses what float32 cannot hold."""
    float32_scalars = True

class DeclaresButComputes(Float32Scalars):
    """Declares float32 scalars but has a supports()/check_problem of its own that lets every scalar through."""
    float32_scalars = True
    def check_problem(self, problem, variant=None):
        pass
    def supports(self, problem):
        return None

SHARED = Good()
'''


RULE_BENDING_CLASSES = ["Good", "KeepsPlans", "SaysTrue", "SaysFalse", "IntoC", "ScalesA", "Peeks", "Float32Scalars",
           "Float32ScalarsDeclared", "DeclaresButComputes"]


#: the plugin sources of the broken backends, by entry-point name: (source, attribute the entry point names)
BROKEN_PLUGINS = {
    "fordev": (BROKEN_BASE + """
class B(Base):
    def for_device(self, index):
        raise RuntimeError("device table unreadable")
""", "B"),
    "roname": (BROKEN_BASE + """
class B(Base):
    @property
    def name(self):
        return "something else"
""", "B"),
    "noattr": (BROKEN_BASE, "Missing"),
    "initargs": (BROKEN_BASE + """
class B(Base):
    def __init__(self, path):
        super().__init__()
""", "B"),
    "initraises": (BROKEN_BASE + """
class B(Base):
    def __init__(self):
        raise RuntimeError("no licence file")
""", "B"),
    "notbackend": ("def B():\n    return 42\n", "B"),
    "syntaxerr": ("def (:\n", "B"),
    "silentprobe": (BROKEN_BASE + """
class B(Base):
    def probe(self):
        return Availability(False, "")
""", "B"),
}


#: a plugin module that cannot be imported, as one whose vendor runtime is missing
BROKEN_IMPORT = 'raise ImportError("vendor runtime libfoo.so.3 not found")\n'
