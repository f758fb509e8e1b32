"""``polygemm compile``: output paths and refusals."""

from __future__ import annotations

import sys

import pytest

from polygemm.apps.cli import main


def test_compile_out_naming_a_file_or_nothing_is_a_usage_error_before_any_build(tmp_path, capsys, monkeypatch):
    # --out naming a file, or an empty --out ("--out $DIR", DIR unset, which would build the whole catalog into the
    # kernel cache), is a usage error before any build
    from polygemm.backends.cuda import compiler as cc

    def no_build(*args, **kwargs):
        raise AssertionError("a build started")

    monkeypatch.setattr(cc, "build", no_build)
    monkeypatch.setattr(cc, "select", no_build)
    afile = tmp_path / "kernels.tar"
    afile.write_text("x")
    for out, says in ((str(afile), "that is a file; name a folder"), ("", "an empty path"), ("  ", "an empty path"),
                      (str(afile / "sub"), "cannot make that folder")):
        assert main(["compile", "--arch", "sm_80", "--only", "copy_scale", "--out", out]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and err.count("\n") == 1, err
    assert afile.read_text() == "x"


def test_compile_help_names_the_compiler_order_it_follows(capsys):
    # "--compiler ... (default: $POLYGEMM_COMPILER, else NVRTC when present, else nvcc)", while the compiler
    # module takes nvcc first where it is installed (README: "where a toolkit is installed its nvcc builds them")
    from polygemm.backends.cuda import compiler

    with pytest.raises(SystemExit):
        main(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    said = text[text.index("--compiler {nvrtc,nvcc} force one"):]
    said = said[said.index("default:"):said.index("--only")]
    order = sorted(compiler.COMPILERS, key=lambda c: said.lower().index(c))
    assert tuple(order) == compiler.COMPILERS, said
    for doc in (compiler.__doc__, sys.modules["polygemm.apps.compile"].__doc__):
        assert "NVRTC, else nvcc" not in doc and "NVRTC (else nvcc)" not in doc


def test_compile_with_compiler_nvrtc_and_no_nvrtc_names_the_option_not_the_variable(monkeypatch, capsys):
    # "polygemm compile --compiler nvrtc" where NVRTC is absent names the option, not POLYGEMM_COMPILER (the user set
    # none), and does not say that the kernels compile at run time (compile builds ahead of time): compiler.select's
    # lead names the variable whenever a compiler is forced
    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    monkeypatch.setenv("POLYGEMM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")
    assert main(["compile", "--compiler", "nvrtc", "--only", "cm_v01_naive", "--arch", "sm_90", "-q"]) == 2
    err = capsys.readouterr().err
    assert "POLYGEMM_COMPILER=" not in err and "compile at run time" not in err and "--compiler nvrtc:" in err


def test_compile_names_an_architecture_given_to_only_as_one(capsys):
    from polygemm.apps.cli import main

    try:
        rc = main(["compile", "--only", "cm_v01_naive", "sm_90"])
    except SystemExit as exc:
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and "--only sm_90: that is an architecture; pass it with --arch (--arch sm_90)" in err
    assert "choose from" not in err


def test_compile_that_selects_no_build_is_an_error(capsys):
    # --arch sm_70 --only cm_v12_cp_async selects no build: an error, not "0 builds ... all passed" with exit 0
    pytest.importorskip("polygemm.backends.cuda.variants")
    assert main(["compile", "--arch", "sm_70", "--only", "cm_v12_cp_async"]) == 2
    err = capsys.readouterr().err
    assert "nothing to build" in err and "cm_v12_cp_async" in err and "sm_70" in err


def test_a_compile_refused_for_its_compiler_makes_no_out_folder(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    monkeypatch.setenv("POLYGEMM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")
    out = tmp_path / "kernels"
    assert main(["compile", "--compiler", "nvrtc", "--only", "cm_v01_naive", "--arch", "sm_90", "--out", str(out)]) == 2
    assert "nvrtc" in capsys.readouterr().err and not out.exists()


def test_compile_arch_takes_comma_separated_architectures(monkeypatch, capsys):
    from polygemm.apps import compile as compile_cmd

    seen = []
    monkeypatch.setattr(compile_cmd, "run", lambda archs, *args, **kwargs: seen.append(archs) or 0)
    assert main(["compile", "--arch", "sm_80,sm_90", "8.6", "--only", "copy_scale"]) == 0
    assert seen == [[80, 90, 86]]
    assert main(["compile", "--arch", ",", "--only", "copy_scale"]) == 2
    assert "--arch ',' names no architecture" in capsys.readouterr().err


def test_compile_compiler_is_read_in_any_case_as_its_variable_is(monkeypatch):
    # POLYGEMM_COMPILER=NVCC picks nvcc; --compiler NVCC does too
    from polygemm.apps import compile as compile_cmd

    seen = []
    monkeypatch.setattr(compile_cmd, "run", lambda archs, out, jobs, compiler, *args, **kwargs: seen.append(compiler) or 0)
    assert main(["compile", "--compiler", "NVCC", "--only", "copy_scale"]) == 0
    assert seen == ["nvcc"]


@pytest.fixture
def fake_nvcc(monkeypatch):
    """nvcc 13.0 at a made-up path, NVRTC absent, no build run: set ``archs`` to what ``--list-gpu-arch`` answers
    (None: the query failed). Returns the list of targets the builds were asked for."""
    from polygemm.backends.cuda import compiler as cc
    from polygemm.errors import DeviceError

    monkeypatch.delenv("POLYGEMM_COMPILER", raising=False)
    monkeypatch.setenv("POLYGEMM_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so")
    monkeypatch.setattr(cc, "find_nvcc", lambda: "/fake/bin/nvcc")
    monkeypatch.setattr(cc, "nvcc_version", lambda nvcc: "Cuda compilation tools, release 13.0, V13.0.48")
    monkeypatch.setattr(cc, "nvcc_archs", lambda nvcc: (75, 80, 90, 120))
    built = []

    def build(source, target, macros=None, *, compiler=None, verbose=False):
        built.append(target)
        raise DeviceError(f"nvcc fatal   : Unsupported gpu architecture 'compute_{target[3:]}'")

    monkeypatch.setattr(cc, "build", build)
    return built


def test_compile_arch_no_compiler_builds_for_is_refused_once_naming_those_it_builds_for(fake_nvcc, capsys, tmp_path):
    assert main(["compile", "--arch", "sm_99", "-q", "--out", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert "--arch sm_99" in err and "nvcc 13.0" in err and "sm_75, sm_80, sm_90, sm_120" in err
    assert err.count("\n") == 1 and not fake_nvcc and not (tmp_path / "k").exists()
    # beside an architecture it builds for, still refused before any build; sm_90a counts as sm_90
    assert main(["compile", "--arch", "sm_90a,sm_99", "-q", "--only", "copy_scale", "--out", str(tmp_path / "k")]) == 2
    assert "--arch sm_99" in capsys.readouterr().err and not fake_nvcc


def test_compile_arch_is_left_to_nvcc_where_it_cannot_list_its_architectures(fake_nvcc, monkeypatch, capsys, tmp_path):
    from polygemm.backends.cuda import compiler as cc

    monkeypatch.setattr(cc, "nvcc_archs", lambda nvcc: None)
    assert main(["compile", "--arch", "sm_99", "-q", "--only", "copy_scale", "--out", str(tmp_path / "k")]) == 1
    assert fake_nvcc == ["sm_99"] and "Unsupported gpu architecture" in capsys.readouterr().out


def test_compile_without_nvcc_says_so_not_the_arch(fake_nvcc, monkeypatch, capsys, tmp_path):
    from polygemm.backends.cuda import compiler as cc

    monkeypatch.setattr(cc, "find_nvcc", lambda: None)
    assert main(["compile", "--arch", "sm_99", "-q", "--only", "copy_scale", "--out", str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert "nvcc not found" in err and "--arch" not in err and not fake_nvcc
