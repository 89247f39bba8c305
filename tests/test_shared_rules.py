"""Rules the tab and the server both apply, each run on one set of golden cases so the
copies cannot drift (the JavaScript side is ``tests/js`` under Node):

* the row view (``analysis/row_view.py`` and ``frontend/view.js``): the server picks and
  orders the rows of ``compare`` and ``compare.csv``, the tab does the same in the
  browser, so the table on screen is the CSV (``tests/golden/view_cases.json``);
* numbers and names as users read them (``text.py`` for the CLI and the HTML
  report, ``frontend/format.js`` for the tab; ``tests/golden/text_cases.json``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tb_opcompare import text
from tb_opcompare.analysis.row_view import apply_view, view_from_params
from tb_opcompare.schema.table import Table

REPO = Path(__file__).parent.parent
GOLDEN = json.loads((REPO / "tests" / "golden" / "view_cases.json").read_text(encoding="utf-8"))
TEXT = json.loads((REPO / "tests" / "golden" / "text_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[case["name"] for case in GOLDEN["cases"]])
def test_the_server_rule_gives_the_golden_rows(case):
    rows = Table.from_frame(pd.DataFrame(GOLDEN["rows"]))
    positions = apply_view(rows, view_from_params(case["params"]))
    assert rows["key"][positions].tolist() == case["expected"]


@pytest.mark.parametrize("name", [name for name in TEXT if name.startswith("format_")])
def test_numbers_read_as_the_golden_cases(name):
    format_value = getattr(text, name)
    arguments = [value if isinstance(value, list) else [value] for value, _ in TEXT[name]]
    assert [format_value(*values) for values in arguments] == [expected for _, expected in TEXT[name]]


def test_invisible_characters_show_as_the_golden_cases():
    from tb_opcompare.errors import escape_control_characters

    for value, expected in TEXT["escape_control_characters"]:
        assert escape_control_characters(value) == expected, value


def test_names_shorten_as_the_golden_cases():
    for case in TEXT["shorten_names"]:
        assert text.shorten_names(case["names"], case["length"], case["keep"]) == case["expected"], case


def test_two_ops_that_differ_in_an_inner_scope_stay_told_apart():
    names = ["gradients/dense_1/weights/ApplyGradientDescent", "gradients/dense_2/weights/ApplyGradientDescent"]
    short = text.shorten_names(names, 36)
    assert len(set(short)) == 2 and all(len(name) <= 36 and name.endswith("/ApplyGradientDescent") for name in short)


def test_the_tab_rules_give_the_golden_answers():
    node = shutil.which("node")
    assert node, "Node.js is needed for the tab's half of this test (tests/js): apt-get install nodejs"
    result = subprocess.run([node, "--test", "tests/js/"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"node --test tests/js/ failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
