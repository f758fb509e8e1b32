"""A demanding user's edges, seventh round: bad option values of ``polygemm bench`` are usage errors
(exit 2, as argparse ends the CLI's others), ml_dtypes' real scalars of every kind as alpha and beta,
the refusal of an ``out`` whose matrices no kernel writes (what its strides do, what to pass), a
device index written otherwise than torch.device writes one (``"cpu:01"``); and, found on the way,
``--variants`` that names nothing (bench, matrix) or has spaces after its commas (bench), and
matmul's reversed vector ``out``. Each test failed before the fix it names."""

from __future__ import annotations

import re

import numpy as np
import pytest

import polygemm as pg
from polygemm.cli import main

ml_dtypes = pytest.importorskip("ml_dtypes")


def _usage_error(capsys, argv: list[str]) -> str:
    """Run the command line; it must end in a usage error (exit 2) of one line, no traceback."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err, err
    return err.strip().splitlines()[-1]


# -- defect 1: bench's bad option values are usage errors (exit 2) -----------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_bench_settle_out_of_range_is_a_usage_error(capsys, monkeypatch, value):
    # defect 1: --settle -1 had ended in SystemExit("polygemm bench: ...") with status 1 (usage errors exit 2)
    from polygemm import bench

    monkeypatch.setattr(bench, "run_bench", lambda *a, **k: pytest.fail("timed with a bad --settle"))
    last = _usage_error(capsys, ["bench", "--device", "cpu", "--mode", "kernel", "--shapes", "8x8x8", "--settle", value])
    assert last == f"polygemm bench: error: argument --settle: must be >= 0 seconds and finite; got {value!r}"


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bench_repeats_below_one_is_a_usage_error_like_a_word(capsys, value):
    # defect 1: --repeats 0 had been "polygemm: error: ..." after the parser, while --repeats many was argparse's
    last = _usage_error(capsys, ["bench", "--device", "cpu", "--shapes", "8x8x8", "--repeats", value])
    assert last == f"polygemm bench: error: argument --repeats: must be an integer >= 1 or auto; got {value!r}"
