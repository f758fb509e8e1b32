"""tools/precision_bench.py without a GPU: the bound each row is held to, the interleaved timing, the shapes it takes."""

from __future__ import annotations

import types

import pytest

from tests.helpers import tool_module


@pytest.fixture(scope="module")
def tool():
    return tool_module("precision_bench")


def test_the_bound_follows_the_dtype_and_the_precision_that_ran(tool):
    u32, u64 = 2.0 ** -24, 2.0 ** -53
    assert tool.bound_for("float32", "highest", 4096) == pytest.approx(2 * 4096 * u32)
    assert tool.bound_for("float32", "medium", 16) == pytest.approx(2 * 16 * u32 + 2 * 2.0 ** -11)
    assert tool.bound_for("complex64", "highest", 100) == pytest.approx(4 * 102 * u32)
    assert tool.bound_for("float64", "float64", 4096) == pytest.approx(2 * 4096 * u64)
    assert tool.bound_for("float64", "medium", 4096) == pytest.approx(2 * 4096 * u64)  # precision governs float32 only


def test_the_functions_take_turns_and_each_gets_the_median_of_its_repeats(tool):
    order, clock = [], [0.0]

    class Event:
        def record(self):
            self.at = clock[0]

        def synchronize(self):
            pass

    cuda = types.SimpleNamespace(Event=Event, Device=lambda: types.SimpleNamespace(synchronize=lambda: None),
                                 get_elapsed_time=lambda start, stop: stop.at - start.at)
    cp = types.SimpleNamespace(cuda=cuda)

    def fn(name, ms):
        def call():
            order.append(name)
            clock[0] += ms
        return call

    times = tool._time_interleaved(cp, [fn("ours", 2.0), fn("vendor", 1.0)], calls=4, repeats=3)
    assert times == [pytest.approx(2000.0), pytest.approx(1000.0)]  # µs per call
    assert order[:2] == ["ours", "vendor"]  # warm-up, then repeats of 4 calls each, in turn
    assert order[2:] == (["ours"] * 4 + ["vendor"] * 4) * 3


def test_presets_and_comma_lists_are_shapes(tool, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(tool, "parse_shapes", lambda items: seen.append(list(items)) or [])
    monkeypatch.setitem(__import__("sys").modules, "cupy", types.SimpleNamespace())
    assert tool.main(["--shapes", "real", "8x16x32,2x2x2"]) == 0  # no shapes to run: nothing out of bound
    assert seen == [["real", "8x16x32,2x2x2"]]
