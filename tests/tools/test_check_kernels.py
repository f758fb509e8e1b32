"""tools/check_kernels.py: which builds a check compiles in full, and NVRTC's front-end check."""

from __future__ import annotations

from pathlib import Path

import pytest

from polygemm.apps.compile import covering, jobs
from polygemm.backends.cuda import compiler
from polygemm.errors import DeviceError

from tests.helpers import REPO_ROOT, nvrtc_missing, tool_module


needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=f"no NVRTC: {nvrtc_missing()}")


def _tool():
    return tool_module("check_kernels")


def test_the_cover_takes_every_variant_and_macro_value_of_each_source_through_ptxas() -> None:
    todo = jobs([80, 90])
    cover = covering(todo)
    assert len(cover) < len(todo) / 5  # the point of it: a fraction of the catalog
    assert len(set(cover)) == len(cover)
    for key in {(j.source, j.target) for j in todo}:
        every = [j for j in todo if (j.source, j.target) == key]
        taken = [j for j in cover if (j.source, j.target) == key]
        assert taken, f"{key} has no build in the cover"
        assert {j.name for j in taken} == {j.name for j in every}
        assert {m for j in taken for m in j.macros} == {m for j in every for m in j.macros}


def test_the_cover_of_one_variant_is_its_own_builds() -> None:
    todo = jobs([90], ["hgemm_v1_mma_ldmatrix"])
    cover = covering(todo)
    assert set(cover) <= set(todo)
    values = {(k, v) for j in todo for k, v in j.macros}
    assert {(k, v) for j in cover for k, v in j.macros} == values
    # a macro with two values needs two builds; no more than the most values any macro takes per target
    most = max(len({v for j in todo for k, v in j.macros if k == name}) for name, _ in values)
    assert len(cover) <= most * len({j.target for j in todo}) + 1


def test_one_build_of_each_source_and_target() -> None:
    tool = _tool()
    todo = jobs([80, 90])
    one = tool.selected(todo, "one")
    assert len(one) == len({(j.source, j.target) for j in todo})
    assert one[0] == todo[0]  # the first build of each: the catalog's order
    assert tool.selected(todo, "all") == todo
    assert tool.selected(todo, "cover") == covering(todo)


@needs_nvrtc
def test_the_front_end_check_passes_a_build_and_names_a_broken_one(tmp_path: Path) -> None:
    good = jobs([90], ["rm_v0_global_mem"])[0]
    assert isinstance(compiler.check_front_end(good.source, good.target, dict(good.macros)), str)
    broken = tmp_path / "broken.cu"
    broken.write_text(
        "template <int N> struct Tile { static_assert(N % 16 == 0, \"PG_BN must be a multiple of 16\"); };\n"
        "extern \"C\" __global__ void k(float* p) { Tile<PG_BN> t; (void)t; p[0] = 1.f; }\n"
    )
    assert isinstance(compiler.check_front_end(broken, "sm_90", {"PG_BN": 64}), str)
    with pytest.raises(DeviceError, match=r"(?s)broken\.cu.*PG_BN=24.*front end.*multiple of 16"):
        compiler.check_front_end(broken, "sm_90", {"PG_BN": 24})


def test_the_front_end_check_without_nvrtc_says_so_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, POLYGEMM_NVRTC_LIBRARY="/nonexistent/libnvrtc.so")
    r = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "check_kernels.py"), "--front-end", "--compiler", "nvrtc", "-q"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert r.stderr.count("check_kernels:") == 1 and "nvrtc" in r.stderr.lower() and "pip install" in r.stderr
    assert "FAIL" not in r.stdout
