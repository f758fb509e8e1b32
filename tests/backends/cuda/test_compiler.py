"""The CUDA compile path without a GPU: NVRTC builds, the verified cache, prebuilt cubins."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polygemm.apps import cli
from polygemm.apps.compile import jobs, parse_arch
from polygemm.backends.cuda import compiler, nvrtc
from polygemm.backends.cuda.variants import KERNEL_DIR, kernel_specs
from polygemm.errors import ArgumentError, BackendUnavailableError, DeviceError

from tests.helpers import REPO_ROOT, nvrtc_missing


needs_nvrtc = pytest.mark.skipif(nvrtc_missing() is not None, reason=f"no NVRTC: {nvrtc_missing()}")


UTIL = KERNEL_DIR / "util" / "copy_scale.cu"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POLYGEMM_KERNEL_DIR", raising=False)
    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    return tmp_path / "cache" / "cubin"


FAKE = compiler._Compiler("nvrtc", "0.0", "fake for tests", "fake")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Stand a fake compiler in: each build appends its arguments to the returned list."""
    calls: list[tuple] = []

    def build(source, target, macros=None, *, compiler=None, verbose=False):  # type: ignore[no-untyped-def]
        calls.append((source, target, dict(macros or {})))
        body = f"{source.name} {target} {sorted((macros or {}).items())}".encode()
        return compiler_mod.Built(b"\x7fELF" + body, FAKE.describe(), "ptxas info    : Used 32 registers\n0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")

    compiler_mod = compiler
    monkeypatch.setattr(compiler, "select", lambda target=None, compiler=None, when=None: FAKE)
    monkeypatch.setattr(compiler, "build", build)
    return calls


ROOT = REPO_ROOT


_CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from polygemm.backends.cuda import compiler
    log, fake = Path(sys.argv[1]), sys.argv[2] == "fake"
    if fake:
        def build(source, target, macros=None, *, compiler=None, verbose=False):
            with open(log, "a") as f:
                f.write("built\\n")
            time.sleep(1.0)  # long enough for the other process to arrive meanwhile
            return compiler_mod.Built(b"\\x7fELF" + b"x" * 100000, "fake", "")
        compiler_mod = compiler
        compiler.select = lambda target=None, compiler=None, when=None: compiler_mod._Compiler("nvrtc", "0", "fake", "fake")
        compiler.build = build
    while time.time() < float(sys.argv[3]):  # start together
        time.sleep(0.005)
    data = compiler.compile_cubin(compiler.KERNEL_DIR / "util" / "copy_scale.cu", "sm_80")
    sys.stdout.buffer.write(data)
    """
)


def _two_processes(tmp_path: Path, cache: Path, mode: str) -> tuple[list[bytes], int]:
    import time

    log = tmp_path / "builds.log"
    start = f"{time.time() + 2.0}"
    env = {**os.environ, "POLYGEMM_CACHE_DIR": str(cache.parent), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(log), mode, start], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
        outs.append(out)
    return outs, log.read_text().count("built") if log.exists() else 0


@needs_nvrtc
def test_nvrtc_builds_a_cubin() -> None:
    b = compiler.build(UTIL, "sm_80", compiler="nvrtc", verbose=True)
    assert b.cubin[:4] == b"\x7fELF"
    assert b.compiler.startswith("NVRTC ")
    # the resource usage verbose asks for, where this NVRTC's program log carries ptxas's lines (13.3's does; the 13.0
    # wheel of the GPU machine leaves the log empty)
    assert "registers" in b.log or not b.log.strip(), b.log


@needs_nvrtc
def test_nvrtc_builds_the_tma_rung_for_sm90a() -> None:
    """cuda.h (CUtensorMap) and <stdint.h>, which NVRTC alone cannot include, and an sm_90a target."""
    spec = kernel_specs()["hgemm_v2_wgmma_tma"]
    b = compiler.build(spec.source, "sm_90a", spec.builds()[0], compiler="nvrtc")
    assert b.cubin[:4] == b"\x7fELF"


@needs_nvrtc
def test_nvrtc_error_names_the_kernel_and_the_log(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { undeclared_thing(); }\n')
    with pytest.raises(DeviceError, match=r"(?s)bad.cu for sm_80 with NVRTC .*undeclared_thing"):
        compiler.build(bad, "sm_80", compiler="nvrtc")


def test_nvrtc_missing_library_says_what_to_install(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYGEMM_NVRTC_LIBRARY", str(cache.parent / "no-libnvrtc.so"))
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with pytest.raises(BackendUnavailableError, match=r"cannot load NVRTC from .*no-libnvrtc.so.*pip install 'polygemm\[nvrtc\]'"):
        compiler.select("sm_90")
    reason = compiler.available("sm_90")
    assert reason is not None and "nvcc not found" in reason and "polygemm[nvrtc]" in reason
    assert "no CUDA compiler" in compiler.describe()


def test_compiler_env_forces_one_and_rejects_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYGEMM_COMPILER", "clang")
    with pytest.raises(BackendUnavailableError, match="POLYGEMM_COMPILER='clang': expected nvrtc, nvcc"):
        compiler.select("sm_90")
    monkeypatch.setenv("POLYGEMM_COMPILER", "nvcc")
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with pytest.raises(BackendUnavailableError, match="POLYGEMM_COMPILER=nvcc: nvcc not found"):
        compiler.select("sm_90")


def test_shim_headers_cover_what_nvrtc_lacks() -> None:
    """Every C/C++ library header a kernel includes is one NVRTC has or a stand-in provides."""
    import re

    wanted = set()
    for p in KERNEL_DIR.rglob("*.cu"):
        wanted |= set(re.findall(r"#\s*include\s*<([^>]+)>", p.read_text()))
    cuda_headers = {"cuda.h", "cuda_fp16.h", "cuda_bf16.h", "mma.h", "cuda_pipeline.h"}
    assert wanted - cuda_headers <= set(nvrtc.SHIM_HEADERS), wanted


def test_cache_dir_is_created_owner_only(cache: Path) -> None:
    path = compiler.cache_dir()
    assert path == cache and path.is_dir()
    if hasattr(os, "getuid"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_loose_cache_dir_is_closed(cache: Path) -> None:
    cache.mkdir(parents=True)
    os.chmod(cache, 0o777)
    compiler.cache_dir()
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700


def test_file_in_place_of_the_cache_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(f))
    with pytest.raises(BackendUnavailableError, match=r"kernel cache .* is a file; point POLYGEMM_CACHE_DIR at a directory"):
        compiler.cache_dir()
    monkeypatch.setenv("POLYGEMM_CACHE_DIR", str(tmp_path))
    (tmp_path / "cubin").write_text("x")  # the folder below
    with pytest.raises(BackendUnavailableError, match="POLYGEMM_CACHE_DIR"):
        compiler.cache_dir()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_cache_dir_of_another_user_is_refused(cache: Path) -> None:
    cache.mkdir(parents=True, mode=0o700)
    os.chown(cache, 12345, 12345)
    with pytest.raises(BackendUnavailableError, match=r"owned by another user \(uid 12345"):
        compiler.cache_dir()


def test_cache_hit_builds_nothing(cache: Path, fake: list) -> None:
    a = compiler.compile_cubin(UTIL, "sm_80", {"X": 1})
    b = compiler.compile_cubin(UTIL, "sm_80", {"X": 1})
    assert a == b and len(fake) == 1
    compiler.compile_cubin(UTIL, "sm_80", {"X": 2})
    compiler.compile_cubin(UTIL, "sm_90", {"X": 1})
    assert len(fake) == 3
    assert compiler.built_by(UTIL, "sm_80", {"X": 1}) == f"{FAKE.describe()} (from the cache)"


@pytest.mark.parametrize("damage", ["planted", "truncated", "garbage", "empty"])
def test_corrupt_entry_is_rebuilt_with_a_warning(cache: Path, fake: list, damage: str) -> None:
    good = compiler.compile_cubin(UTIL, "sm_80")
    (entry,) = cache.glob("*.cubin")
    raw = entry.read_bytes()
    if damage == "planted":  # same length and header, other code: the stored hash no longer matches
        bad = raw[:-8] + b"EVILCODE"
    elif damage == "truncated":
        bad = raw[: len(raw) // 2]
    elif damage == "garbage":
        bad = b"\x7fELF not an entry at all"
    else:
        bad = b""
    entry.write_bytes(bad)
    with pytest.warns(RuntimeWarning, match="is corrupt.*rebuilding it"):
        again = compiler.compile_cubin(UTIL, "sm_80")
    assert again == good and len(fake) == 2
    assert entry.read_bytes() == raw  # rebuilt in place


def test_entries_are_verified_and_carry_the_compiler() -> None:
    data = compiler.pack({"compiler": "X 1.0"}, b"\x7fELFabc")
    assert compiler.unpack(data) == ({"compiler": "X 1.0"}, b"\x7fELFabc")
    assert compiler.unpack(data[:-1]) is None
    assert compiler.unpack(data[:-1] + b"d") is None


def test_key_covers_every_included_file() -> None:
    v13 = kernel_specs()["cm_v13_cp_async_narrow_tile"].source
    names = {compiler._rel(p) for p in compiler._local_includes(v13)}
    assert {"sgemm_cm/v13_cp_async_narrow_tile.cu", "sgemm_cm/v12_cp_async.cu", "common.cuh"} <= names
    k = compiler.source_key(v13, "sm_90", {"PG_VEC": 1})
    assert k != compiler.source_key(v13, "sm_90", {"PG_VEC": 0}) != compiler.source_key(v13, "sm_80", {"PG_VEC": 1})


def test_two_processes_building_one_kernel(tmp_path: Path, cache: Path) -> None:
    outs, builds = _two_processes(tmp_path, cache, "fake")
    assert outs[0] == outs[1] and outs[0][:4] == b"\x7fELF"
    if sys.platform != "win32":
        assert builds == 1  # the second waited for the first's lock, then read its entry
    (entry,) = cache.glob("*.cubin")
    assert compiler.unpack(entry.read_bytes())[1] == outs[0]
    assert not list(cache.glob(".*.tmp"))


@needs_nvrtc
def test_two_processes_building_one_kernel_with_nvrtc(tmp_path: Path, cache: Path) -> None:
    outs, _ = _two_processes(tmp_path, cache, "nvrtc")
    assert outs[0] == outs[1] and outs[0][:4] == b"\x7fELF"


def test_prebuilt_cubins_are_used_without_compiling(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kdir = tmp_path / "prebuilt"
    kdir.mkdir()
    cubin = b"\x7fELF prebuilt"
    (kdir / compiler.prebuilt_name(UTIL, "sm_90", {"A": 1})).write_bytes(compiler.pack(compiler.meta_for(UTIL, "sm_90", {"A": 1}, "NVRTC 9.9 (test)"), cubin))
    monkeypatch.setenv("POLYGEMM_KERNEL_DIR", str(kdir))

    def no(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("compiled although a prebuilt cubin is there")

    monkeypatch.setattr(compiler, "build", no)
    monkeypatch.setattr(compiler, "select", no)
    assert compiler.compile_cubin(UTIL, "sm_90", {"A": 1}) == cubin
    assert compiler.built_by(UTIL, "sm_90", {"A": 1}) == f"prebuilt in {kdir} (NVRTC 9.9 (test))"
    assert compiler.available() is None
    assert not cache.exists()  # nothing compiled, nothing cached


def test_prebuilt_cubin_for_another_build_is_not_used(tmp_path: Path, cache: Path, fake: list, monkeypatch: pytest.MonkeyPatch) -> None:
    kdir = tmp_path / "prebuilt"
    kdir.mkdir()
    wrong = compiler.pack(compiler.meta_for(UTIL, "sm_80", {}, "x"), b"\x7fELF for sm_80")
    (kdir / compiler.prebuilt_name(UTIL, "sm_90", {})).write_bytes(wrong)  # renamed by hand
    monkeypatch.setenv("POLYGEMM_KERNEL_DIR", str(kdir))
    with pytest.warns(RuntimeWarning, match="holds util/copy_scale.cu for sm_80"):
        got = compiler.compile_cubin(UTIL, "sm_90")
    assert got != b"\x7fELF for sm_80" and len(fake) == 1


def test_kernel_dir_that_is_not_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYGEMM_KERNEL_DIR", str(tmp_path / "missing"))
    with pytest.raises(BackendUnavailableError, match="POLYGEMM_KERNEL_DIR=.*missing is not a directory"):
        compiler.compile_cubin(UTIL, "sm_90")


def test_parse_arch() -> None:
    assert [parse_arch(a) for a in ("sm_80", "sm_90a", "90", "8.6", "compute_89", "sm_100", "sm_120")] == [80, 90, 90, 86, 89, 100, 120]
    with pytest.raises(ArgumentError, match="expected sm_XY"):
        parse_arch("hopper")
    for old in ("sm_12", "3.5", "compute_20"):  # read as capabilities, but none a toolkit builds for
        with pytest.raises(ArgumentError, match=r"older than CUDA 12 builds for; expected sm_50 or newer"):
            parse_arch(old)


def test_jobs_cover_the_catalog() -> None:
    todo = jobs([80, 90])
    specs = kernel_specs()
    # rows that share a source and macros (a rung and its persistent-grid row) share their builds
    expected = len({(s.source, s.arch or sm, tuple(sorted(b.items()))) for sm in (80, 90) for s in specs.values() if s.runs_on(sm)
                    for b in s.builds()})
    helpers = len(list((KERNEL_DIR / "util").glob("*.cu")) + list((KERNEL_DIR / "hgemm").glob("*probe*.cu"))
                  + list((KERNEL_DIR / "verify").glob("*.cu")))
    assert len(todo) == expected + 2 * helpers
    assert {j.target for j in todo} == {"sm_80", "sm_90", "sm_90a"}
    assert jobs([90, 90]) == jobs([90])
    with pytest.raises(ArgumentError, match="--only nosuch: no such variant"):
        jobs([90], ["nosuch"])


def test_compile_command_writes_what_the_backend_loads(tmp_path: Path, cache: Path, fake: list, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert cli.main(["compile", "--arch", "sm_90", "--out", str(out), "--only", "rm_v0_global_mem", "copy_scale", "-j", "2"]) == 0
    text = capsys.readouterr().out
    assert "9 kernel builds" in text and "all passed" in text
    assert len(list(out.glob("*.cubin"))) == 9
    monkeypatch.setenv("POLYGEMM_KERNEL_DIR", str(out))
    n = len(fake)
    spec = kernel_specs()["rm_v0_global_mem"]
    assert compiler.compile_cubin(spec.source, "sm_90", spec.builds()[3])[:4] == b"\x7fELF"
    assert len(fake) == n  # loaded, not built


def test_compile_command_fills_the_cache(cache: Path, fake: list, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli.main(["compile", "--arch", "sm_80", "--only", "copy_scale", "-q"]) == 0
    assert len(list(cache.glob("*.cubin"))) == 1 and len(fake) == 1
    compiler.compile_cubin(UTIL, "sm_80")
    assert len(fake) == 1  # the backend's lookup finds what compile wrote


def test_compile_command_fails_on_spills_in_auto_kernels(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def spilling(source, target, macros=None, *, compiler=None, verbose=False):  # type: ignore[no-untyped-def]
        return compiler_mod.Built(b"\x7fELF", "fake", "Used 255 registers\n8 bytes spill stores, 8 bytes spill loads")

    compiler_mod = compiler
    monkeypatch.setattr(compiler, "select", lambda target=None, compiler=None, when=None: FAKE)
    monkeypatch.setattr(compiler, "build", spilling)
    teaching = next(n for n, s in kernel_specs().items() if not s.predicated)
    auto = next(n for n, s in kernel_specs().items() if s.predicated)
    assert cli.main(["compile", "--arch", "sm_90", "--out", str(tmp_path / "a"), "--only", teaching]) == 0
    assert "note register spill" in capsys.readouterr().out
    assert cli.main(["compile", "--arch", "sm_90", "--out", str(tmp_path / "b"), "--only", auto]) == 1
    assert "FAIL register spill" in capsys.readouterr().out


@needs_nvrtc
def test_compile_command_with_nvrtc(tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert cli.main(["compile", "--arch", "sm_90", "--out", str(out), "--only", "rm_v0_global_mem", "copy_scale", "--compiler", "nvrtc", "-q"]) == 0
    text = capsys.readouterr().out
    assert "with NVRTC" in text and "9 kernel builds" in text
    for f in out.glob("*.cubin"):
        meta, cubin = compiler.unpack(f.read_bytes())
        assert cubin[:4] == b"\x7fELF" and meta["compiler"].startswith("NVRTC")


def test_a_compiler_asked_for_by_name_says_what_to_install_once(monkeypatch) -> None:
    monkeypatch.setattr(compiler, "_nvrtc_compiler", lambda: (None, "NVRTC (libnvrtc) not found: pip install 'polygemm[nvrtc]'"))
    with pytest.raises(BackendUnavailableError) as info:
        compiler.select("sm_90", "nvrtc", when="polygemm compile builds the kernels ahead of time with one")
    assert str(info.value).count("pip install") == 1 and str(info.value).startswith("compiler 'nvrtc': ")


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for nvcc")
def test_nvcc_archs_reads_list_gpu_arch_and_is_none_where_the_query_fails(tmp_path: Path) -> None:
    def nvcc(name: str, body: str) -> str:
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
        return str(path)

    assert compiler.nvcc_archs(nvcc("lists", "printf 'compute_90\\ncompute_75\\ncompute_100\\n'")) == (75, 90, 100)
    assert compiler.nvcc_archs(nvcc("refuses", "echo 'nvcc fatal   : Unknown option' >&2; exit 1")) is None
    assert compiler.nvcc_archs(nvcc("silent", "exit 0")) is None
    assert compiler.nvcc_archs(str(tmp_path / "absent")) is None


def test_select_skips_an_nvcc_that_lists_no_such_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: "/fake/bin/nvcc")
    monkeypatch.setattr(compiler, "nvcc_version", lambda nvcc: "Cuda compilation tools, release 13.0, V13.0.48")
    monkeypatch.setattr(compiler, "nvcc_archs", lambda nvcc: (75, 90))
    assert compiler.select("sm_90a", "nvcc").name == "nvcc"
    with pytest.raises(BackendUnavailableError, match="cannot build for sm_99"):
        compiler.select("sm_99", "nvcc")
    assert "sm_75, sm_90" in compiler.unbuildable("sm_99", "nvcc")
    monkeypatch.setattr(compiler, "nvcc_archs", lambda nvcc: None)  # cannot say: nvcc is asked, as before
    assert compiler.select("sm_99", "nvcc").name == "nvcc" and compiler.unbuildable("sm_99", "nvcc") is None
