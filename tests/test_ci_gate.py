"""The gate where teams run it (issue 58): the composite GitHub action
(.github/actions/check/action.yml) run as a script, its steps as GitHub runs them (inputs
through the environment, outputs and the job summary through GITHUB_OUTPUT and
GITHUB_STEP_SUMMARY), against moto's S3 server holding a team's profiles: the main
branch's runs and a pull request's, side by side under two prefixes, indexed first as a
team's bucket is. A slower head fails the job and says which op; runs of the same code
pass."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES, REPO

ACTION = REPO / ".github" / "actions" / "check" / "action.yml"
REPEATS = FIXTURES / "repeats" / "logdir"


def _inputs(action: dict, given: dict) -> dict:
    return {name: given.get(name, spec.get("default", "")) for name, spec in action["inputs"].items()}


def _expand(text: str, inputs: dict) -> str:
    """``${{ inputs.x }}`` as GitHub expands it, the rest of the text as it is."""
    return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda match: inputs[match.group(1)], text)


def _run_action(given: dict, env: dict, work: Path) -> tuple[int, dict, str, str]:
    """The action's steps after the install (this venv holds the package): (the check
    step's exit status, its outputs, the job summary, its stdout)."""
    action = yaml.safe_load(ACTION.read_text())
    inputs = _inputs(action, given)
    install, check = action["runs"]["steps"]
    assert _expand(install["run"], inputs) == 'python -m pip install --quiet "tb-opcompare[s3]"'
    outputs, summary = work / "outputs", work / "summary.md"
    for path in (outputs, summary):
        path.write_text("")
    step_env = {name: _expand(str(value), inputs) for name, value in check["env"].items()}
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(
        ["bash", "-e", "-c", _expand(check["run"], inputs)],
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            **env,
            **step_env,
            "PATH": bin_dir + os.pathsep + os.environ["PATH"],
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNNER_TEMP": str(work),
            "TB_OPCOMPARE_CACHE_DIR": str(work / "cache"),
        },
    )
    found = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    return done.returncode, found, summary.read_text(), done.stdout + done.stderr


@pytest.fixture(scope="module")
def team_bucket(tmp_path_factory):
    """moto's S3 server; the bucket holds main/ (the repeats' base runs) and pr-7/ (the
    same CNN with its head made slower), indexed."""
    from s3_server import s3_server

    root = tmp_path_factory.mktemp("team")
    local = root / "profiles"
    for run in REPEATS.iterdir():
        prefix = "main" if run.name.startswith("cnn_") else "pr-7"
        shutil.copytree(run, local / prefix / run.name)
    with s3_server(root / "moto.log") as server:
        server.upload(local, "team", "profiles")
        env = server.env("writer")
        indexed = subprocess.run(
            [str(Path(sys.executable).parent / "tb-opcompare"), "index", "s3://team/profiles", "--no-cache"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, **env},
        )
        assert indexed.returncode == 0, indexed.stdout + indexed.stderr
        yield env


def test_a_pull_request_whose_head_got_slower_fails_the_job_and_says_which_op(team_bucket, tmp_path):
    status, outputs, summary, printed = _run_action(
        {"logdir": "s3://team/profiles", "baseline": "main/cnn_cpu_bs16_rep*", "target": "pr-7/cnnslow_cpu_bs16_rep*"},
        team_bucket,
        tmp_path,
    )
    assert status == 1, printed
    assert outputs["passed"] == "false" and outputs["headline"].startswith("FAIL: a significant regression")
    assert summary.startswith("### ❌ tb-opcompare check: FAIL") and "| head | slower |" in summary
    report = ElementTree.parse(outputs["junit"]).getroot()
    failed = [case.get("name") for case in report.iter("testcase") if case.find("failure") is not None]
    assert failed == ["head"]


def test_runs_of_the_same_code_pass(team_bucket, tmp_path):
    status, outputs, summary, printed = _run_action(
        {
            "logdir": "s3://team/profiles",
            "baseline": "main/cnn_cpu_bs16_rep[123]",
            "target": "main/cnn_cpu_bs16_rep[456]",
        },
        team_bucket,
        tmp_path,
    )
    assert status == 0, printed
    assert outputs["passed"] == "true"
    assert "tb-opcompare check:" in summary and "FAIL" not in summary.splitlines()[0]


def test_a_usage_error_fails_the_step_with_its_message(team_bucket, tmp_path):
    status, outputs, summary, printed = _run_action(
        {"logdir": "s3://team/profiles", "baseline": "main/no_such_run", "target": "pr-7/cnnslow_cpu_bs16_rep*"},
        team_bucket,
        tmp_path,
    )
    assert status == 2 and outputs["passed"] == "false" and summary == ""
    assert "main/no_such_run" in printed


def test_runs_recorded_in_the_job_are_checked_against_a_stored_baseline(team_bucket, tmp_path):
    """The pull request's runs in the job's own folder, the main branch's kept in the
    bucket (the stored baseline, selected by its prefix and names): the same regression
    is found, and the report says where the baseline came from."""
    recorded = tmp_path / "profiles"
    for run in REPEATS.glob("cnnslow_cpu_bs16_rep*"):
        shutil.copytree(run, recorded / run.name)
    status, outputs, summary, printed = _run_action(
        {
            "logdir": str(recorded),
            "baseline-logdir": "s3://team/profiles/main",
            "baseline": "cnn_cpu_bs16_rep*",
            "target": "cnnslow_cpu_bs16_rep*",
        },
        team_bucket,
        tmp_path,
    )
    assert status == 1, printed
    assert outputs["passed"] == "false" and "(in s3://team/profiles/main)" in summary
    report = ElementTree.parse(outputs["junit"]).getroot()
    assert [case.get("name") for case in report.iter("testcase") if case.find("failure") is not None] == ["head"]
