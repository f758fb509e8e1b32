"""The results page: current, short, each curated file naming card, date, vendor and commands."""

from __future__ import annotations

import json

import pytest

from tests.helpers import REPO_ROOT, tool_module


ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def results_page():
    return tool_module("results_page")


RESULTS = sorted((ROOT / "docs" / "results").glob("*.json"))


def test_the_page_and_the_readme_table_are_current(results_page, capsys):
    assert results_page.main(["--check"]) == 0, capsys.readouterr().err


def test_the_page_stays_short_and_names_where_older_figures_live():
    page = (ROOT / "docs" / "results.md").read_text()
    assert page.count("\n") <= 300
    assert "git history" in page and "cupy.matmul" in page


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_a_curated_file_names_its_card_date_vendor_and_commands(path):
    data = json.loads(path.read_text())
    assert data["gpu"] and data["date"] and data["vendor"] and data["commands"] and data["title"]
    rows = data.get("records") or data.get("rows")
    assert rows
    if "records" in data and data["view"] != "dask":
        assert {r["run"] for r in rows} <= set(range(len(data["commands"])))


def test_docs_stay_a_manual_not_a_notebook():
    """Pages by subject: few files, none too long to read (history lives in git)."""
    files = [p for p in (ROOT / "docs").rglob("*") if p.is_file()]
    assert len(files) <= 80
    long = [p.name for p in files if p.suffix == ".md" and p.read_text().count("\n") > 600]
    assert not long
    assert (ROOT / "README.md").read_text().count("\n") <= 150


def test_a_section_of_several_files_says_each_files_own_words_once(results_page):
    shared = "Calls on device arrays. Run on an H100."
    text = results_page._joined([shared + " fp16: tuned.", shared + " fp64: tables folded in."])
    assert text == "Calls on device arrays. Run on an H100. fp16: tuned. fp64: tables folded in."
