"""The row-view rule has two copies: the server's, which picks and orders the rows of
``compare`` and ``compare.csv``, and the tab's (``frontend/view.js``), which does the same
in the browser so the table on screen is the CSV. Both must give the answers in
``tests/golden/view_cases.json``; the JavaScript side is ``tests/js`` under Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tb_opcompare.analysis.row_view import apply_view, view_from_params

REPO = Path(__file__).parent.parent
GOLDEN = json.loads((REPO / "tests" / "golden" / "view_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=[case["name"] for case in GOLDEN["cases"]])
def test_the_server_rule_gives_the_golden_rows(case):
    rows = pd.DataFrame(GOLDEN["rows"])
    positions = apply_view(rows, view_from_params(case["params"]))
    assert rows["key"].iloc[positions].tolist() == case["expected"]


def test_the_tab_rule_gives_the_golden_rows():
    node = shutil.which("node")
    assert node, "Node.js is needed for the tab's half of this test (tests/js): apt-get install nodejs"
    result = subprocess.run([node, "--test", "tests/js/"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"node --test tests/js/ failed:\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"
