"""The command line at its edges: closed standard streams, sizes past memory or 64 bits, nested JSON, folders named
as files, options given twice, empty paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from polygemm.apps.cli import build_parser
from tests.helpers import REPO_ROOT, cli, cli_error_line, subprocess_env


def _shell(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, capture_output=True, text=True, env=subprocess_env(), cwd=str(REPO_ROOT),
                          timeout=120)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell closes the streams")
def test_a_closed_stdout_is_one_error_line_and_a_closed_stderr_never_reaches_stdout():
    r = _shell(f"{sys.executable} -m polygemm info >&-")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == ("polygemm: error: standard output is closed; give the command somewhere to write (a file, "
                                "a pipe or /dev/null)")
    r = _shell(f"{sys.executable} -m polygemm explain 4x4x4 --json --device nope 2>&-")
    assert r.returncode == 2 and r.stdout == ""  # the error went nowhere, not into the JSON's stream


@pytest.mark.parametrize("argv", [["--shapes", "99999999999999999999x1x1"], ["--shapes", "4000000000x4000000000x4000000000"],
                                  ["--shapes", "8x8x8", "--batch", "1000000000000000000000000000000"],
                                  ["--mode", "kernel", "--shapes", "99999999999999999999x1x1"]],
                         ids=["past int64", "past memory", "batch past int64", "kernel mode"])
def test_bench_leaves_out_a_shape_past_memory_or_64_bits_without_a_traceback(capsys, argv):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--repeats", "1", *argv])
    assert rc == 2 and "Traceback" not in err
    assert "not timed" in out and "too large for this machine" in err and "GiB of host memory" in err


def test_bench_times_the_shapes_that_fit_beside_one_that_does_not(capsys):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--repeats", "1", "--shapes", "4294967296x4294967296x1", "8x8x8"])
    assert rc == 2 and "8x8x8 gemm(auto)" in out and "1 shape not timed" in err


def test_json_nested_past_the_recursion_limit_is_refused_by_name(capsys, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    line = cli_error_line(capsys, ["plot", str(deep)])
    assert "cannot read benchmark records" in line and "nests deeper" in line
    line = cli_error_line(capsys, ["tune", "--from", str(deep)])
    assert f"--from {deep}, line 1: not a recorded product" in line


def test_an_output_path_ending_in_a_slash_names_a_folder(capsys, tmp_path):
    target = tmp_path / "nodir"
    line = cli_error_line(capsys, ["explain", "4x4x4", "--json", f"{target}/"])
    assert "that is a folder; name a file" in line and not target.exists()


def test_list_options_given_twice_add_up():
    parser = build_parser()
    assert parser.parse_args(["compile", "--arch", "sm_90", "--arch", "sm_80"]).arch == ["sm_90", "sm_80"]
    assert parser.parse_args(["compile", "--only", "a", "--only", "b", "c"]).only == ["a", "b", "c"]
    assert parser.parse_args(["matrix", "--backends", "cpu", "--backends", "musa"]).backends == ["cpu", "musa"]
    assert parser.parse_args(["matrix", "--dtypes", "float64", "--dtypes", "float32"]).dtypes == ["float64", "float32"]
    assert parser.parse_args(["variants", "--device", "cpu", "--device", "musa"]).device == ["cpu", "musa"]


def test_explain_takes_one_shape(capsys):
    rc, _, err = cli(capsys, ["explain", "--shape", "4x4x4", "--shape", "8x8x8"])
    assert rc == 2 and "--shape given twice (4x4x4 and then 8x8x8); this command takes one" in err


def test_explain_names_the_batch_that_is_too_large(capsys):
    line = cli_error_line(capsys, ["explain", "4x4x4", "--batch", "99999999999999999999"])
    assert "--shape 4x4x4 with --batch 99999999999999999999" in line and "pick a smaller shape or batch" in line


def test_tune_refuses_an_empty_recording_path(capsys):
    for argv in (["tune", "--from", ""], ["tune", "--shape", "8x8x8", "--from", ""]):
        assert "--from '': an empty path" in cli_error_line(capsys, argv)


def test_a_bad_probe_timeout_is_said_once_a_command(capsys, monkeypatch, fresh_registry):
    monkeypatch.setenv("POLYGEMM_PROBE_TIMEOUT", "abc")
    fresh_registry.refresh()
    rc, out, err = cli(capsys, ["info", "--json"])
    assert rc == 0 and err.count("POLYGEMM_PROBE_TIMEOUT='abc' is not a number") == 1
    json.loads(out)


def test_bench_refuses_all_beside_names_before_its_first_line(capsys):
    rc, out, err = cli(capsys, ["bench", "--device", "cpu", "--variants", "all,blas", "--shapes", "8x8x8", "--repeats", "1"])
    assert rc == 2 and out == "" and "'all' times every variant and takes no other names beside it" in err


def test_bench_refuses_a_dtype_the_backend_does_not_compute_before_its_first_line(capsys, musa):
    rc, out, err = cli(capsys, ["bench", "--device", "musa", "--shapes", "64x64x64", "--repeats", "1"])
    assert rc == 2 and out == "" and "backend 'musa' does not compute it" in err and "--dtype float16" in err


@pytest.mark.parametrize("tool, args", [("verify_campaign.py", ["--device", "cuda", "--out", "v.json"]),
                                        ("profile_rungs.py", ["cm_v01_naive"]), ("trace_items.py", [])])
def test_a_gpu_tool_on_a_machine_without_its_stack_says_so_in_one_line(tmp_path, tool, args):
    """The docs' GPU tools, run where pycuda, CuPy or the device is missing: one line and status 2, not a traceback."""
    import importlib.util

    if all(importlib.util.find_spec(m) is not None for m in ("pycuda", "cupy")):
        pytest.skip("this machine has the GPU stack: the tools run")
    r = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / tool), *args], capture_output=True, text=True,
                       env=subprocess_env(), cwd=str(tmp_path), timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{tool}: error: ") and "Traceback" not in r.stderr
