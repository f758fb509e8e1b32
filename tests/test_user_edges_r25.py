"""A first-time user on a laptop without a GPU, twenty-fifth round (CPU): README.md and docs/*.md read top to bottom
and what they say run literally: the main job (``polygemm gemm --shape 1024x1024x1024 --check``), the opening Python
snippet, ``polygemm info --json`` as the README's jq line reads it, every ``polygemm <command> --option`` the docs
name against that command's ``--help``, and the messages of a missing optional dependency (matplotlib, dask). The
tests marked "defect" failed before the fix they name; the others check edges that were right."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import polygemm as pg
from polygemm.apps.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _without(monkeypatch, *modules):
    """Make ``import <module>`` fail as it does where the package is not installed."""
    for name in list(sys.modules):
        if any(name == m or name.startswith(m + ".") for m in modules):
            monkeypatch.delitem(sys.modules, name)
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


# -- defect: polygemm plot -o without matplotlib named an option the user never gave -----------------------------------

def _rc(argv):
    """The exit status ``polygemm <argv>`` gives (main returns it, argparse raises it)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def _records(tmp_path, capsys):
    path = tmp_path / "r.json"
    assert main(["bench", "--device", "cpu", "--shapes", "32x32x32", "--repeats", "1", "--json", str(path),
                 "--no-progress"]) == 0
    capsys.readouterr()
    return path


def test_plot_output_without_matplotlib_names_the_option_given(tmp_path, capsys, monkeypatch):
    """defect: ``polygemm plot r.json -o r.png`` said '--plot needs matplotlib', an option of bench, not of plot."""
    records = _records(tmp_path, capsys)
    _without(monkeypatch, "matplotlib")
    rc = _rc(["plot", str(records), "-o", str(tmp_path / "r.png")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "-o/--output needs matplotlib" in err and "--plot" not in err, err
    assert "pip install 'polygemm[plot]'" in err
    assert not (tmp_path / "r.png").exists()


def test_bench_plot_without_matplotlib_is_refused_before_any_timing(tmp_path, capsys, monkeypatch):
    _without(monkeypatch, "matplotlib")
    rc = _rc(["bench", "--device", "cpu", "--shapes", "32x32x32", "--json", str(tmp_path / "r.json"),
              "--plot", str(tmp_path / "r.png"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "--plot needs matplotlib" in err and "pip install 'polygemm[plot]'" in err
    assert list(tmp_path.iterdir()) == []


def test_polygemm_dask_without_dask_says_what_to_install(monkeypatch):
    _without(monkeypatch, "dask", "distributed")
    monkeypatch.delitem(sys.modules, "polygemm.dask", raising=False)
    import polygemm.dask as pgd  # importing the module needs no dask; using it does

    with pytest.raises(ImportError, match=re.escape("pip install 'polygemm[dask]'")):
        pgd.gemm(np.ones((2, 2)), np.ones((2, 2)))


# -- the README as written ----------------------------------------------------------------------------------------------

def _auto_backend() -> str:
    """What device="auto" runs float32 on here: the laptop of this round runs the CPU, a GPU machine cuda."""
    return "cuda" if {i.name: i for i in pg.backends()}["cuda"].available else "cpu"


def test_readme_main_job_runs_and_checks(capsys):
    assert main(["gemm", "--shape", "1024x1024x1024", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"backend : {_auto_backend()}" in out and re.search(r"check: PASS: all 1048576 elements within the bound", out), out


def test_readme_opening_snippet_runs_as_it_says():
    a = np.random.rand(1000, 3000).astype(np.float32)
    b = np.random.rand(3000, 2000).astype(np.float32)
    c = pg.gemm(a, b)
    assert c.shape == (1000, 2000) and c.dtype == np.float32
    text = str(pg.explain(a, b))
    if _auto_backend() == "cpu":
        assert "backend : cpu" in text and "passed over cuda" in text
    else:
        assert "backend : cuda" in text
    ref = pg.gemm(a, b, device="cpu", variant="reference")
    assert pg.last_plan().variant == "reference"
    np.testing.assert_allclose(c, ref, rtol=1e-4)
    assert pg.matmul(a[None], b).shape == (1, 1000, 2000)


def test_readme_info_json_jq_line_finds_cpu(capsys):
    assert main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # the README pipes it into jq: nothing but JSON on stdout
    assert "cpu" in [b["name"] for b in data["backends"] if b["available"]]


def _documented_options():
    """(command, option) for every ``polygemm <command> ... --option`` written in README.md and docs/*.md."""
    commands = {"info", "variants", "gemm", "bench", "plot", "matrix", "ceiling", "compile"}
    found = set()
    for doc in DOCS:
        for span in re.findall(r"`([^`\n]*polygemm [a-z]+[^`\n]*)`|^(.*polygemm [a-z]+.*)$", doc.read_text(), re.M):
            text = span[0] or span[1]
            for m in re.finditer(r"\bpolygemm ([a-z]+)((?: +[^|;`#(]*)?)", text):
                if m.group(1) in commands:
                    for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", m.group(2)):
                        found.add((m.group(1), opt))
    return sorted(found)


DOCUMENTED = _documented_options()


def test_the_docs_name_options_at_all():
    assert ("gemm", "--check") in DOCUMENTED and ("bench", "--markdown") in DOCUMENTED and len(DOCUMENTED) >= 15


@pytest.mark.parametrize("command,option", DOCUMENTED)
def test_every_option_the_docs_name_is_in_that_commands_help(capsys, command, option):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", capsys.readouterr().out), (command, option)


@pytest.mark.parametrize("argv,meant", [(["gemm", "--shape", "64x64x64", "--chek"], "--check"),
                                        (["info", "--jsn"], "--json"),
                                        (["matrix", "--backends", "cpu", "--quik=1"], "--quick")])
def test_option_typo_is_told_by_the_command_with_the_option_meant(capsys, argv, meant):
    """defect: a mistyped option of a command (``polygemm gemm ... --chek``) got the top-level usage (``polygemm [-h]
    [--version] {info,...}``) and 'unrecognized arguments' alone; the command's own usage and the option meant now."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith(f"usage: polygemm {argv[0]}") and f"polygemm {argv[0]}: error: unrecognized arguments" in err
    assert f"did you mean {meant}?" in err, err


def test_stray_word_after_a_command_is_told_by_that_command(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["info", "extra"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "polygemm info: error: unrecognized arguments: extra" in err and "did you mean" not in err


def test_a_mistyped_command_names_the_one_meant(capsys):
    # a newcomer's `polygemm ifno` was told the list of commands without the one it most likely meant
    from polygemm.apps.cli import main
    with pytest.raises(SystemExit) as info:
        main(["ifno"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'ifno' (did you mean 'info'?); choose from 'info'," in err
    with pytest.raises(SystemExit):
        main(["xyzzy"])  # nothing near: argparse's own message, no guess
    err = capsys.readouterr().err
    assert "invalid choice: 'xyzzy'" in err and "did you mean" not in err
