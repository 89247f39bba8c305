"""Every broken input of the corpus gets its clear error, in the readers, the CLI, the
HTTP API and the tab; the good runs beside it keep working; nothing leaks or is written."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from conftest import run_cli
from malformed_corpus import build_corpus

from tb_opcompare.errors import ProfileError
from tb_opcompare.store.catalog import Catalog

GOOD_RUN = "odd_names_cpu_bs4"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus") / "logs"
    root.mkdir()
    cases = build_corpus(root)
    return root, cases


def error_cases():
    """Case names, for parametrising before the corpus exists (build_corpus is deterministic)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "logs"
        root.mkdir()
        return [case.run for case in build_corpus(root) if case.reason]


ERROR_CASES = error_cases()


def case_named(cases, name):
    return next(case for case in cases if case.run == name)


def test_the_corpus_is_large_enough():
    assert len(ERROR_CASES) >= 15


@pytest.mark.parametrize("name", ERROR_CASES)
def test_reader_raises_the_documented_error(corpus, name):
    root, cases = corpus
    case = case_named(cases, name)
    with pytest.raises(ProfileError) as raised:
        Catalog(str(root), cache_dir=None).load(case.run)
    assert raised.value.path == str(case.path)
    assert case.reason in raised.value.reason


def test_survivable_inputs_read(corpus):
    root, cases = corpus
    catalog = Catalog(str(root), cache_dir=None)
    for case in cases:
        if case.reason is None:
            case.check(catalog.load(case.run))


@pytest.mark.parametrize("name", ERROR_CASES)
def test_cli_exits_1_naming_file_and_reason(corpus, name):
    """In this process (the CLI's own code path, without a process start per case); the
    installed command itself is run on one case below."""
    import contextlib
    import io

    from tb_opcompare.cli.main import main

    root, cases = corpus
    case = case_named(cases, name)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", str(root), "--baseline", case.run, "--target", GOOD_RUN, "--no-cache"])
    assert code == 1
    assert f"error: cannot read {case.path}:" in err.getvalue() and case.reason in err.getvalue()


def test_the_installed_command_exits_1_without_a_traceback(corpus):
    root, cases = corpus
    case = case_named(cases, ERROR_CASES[0])
    result = run_cli("compare", str(root), "--baseline", case.run, "--target", GOOD_RUN, "--no-cache")
    assert result.returncode == 1
    assert f"error: cannot read {case.path}:" in result.stderr and case.reason in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_runs_lists_every_broken_file_and_every_good_run(corpus):
    root, cases = corpus
    result = run_cli("runs", str(root), "--no-cache")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    unreadable = result.stdout.split("unreadable:")[1]
    for case in cases:
        if case.reason:
            assert f"{case.path}: " in unreadable
        else:
            assert result.stdout.count(f"{case.run}\tformat=") == 1


@pytest.fixture(scope="module")
def corpus_tensorboard(corpus):
    from tensorboard_server import running_tensorboard

    root, cases = corpus
    before = sorted(str(p) for p in root.rglob("*") if not p.is_symlink())
    with running_tensorboard(root) as url:
        yield url, root, cases
    after = sorted(str(p) for p in root.rglob("*") if not p.is_symlink())
    assert after == before, "the plugin wrote into the logdir"


def get(url, **params):
    try:
        with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode(params)}", timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_api_runs_lists_the_errors_and_serves_the_good_runs(corpus_tensorboard):
    url, _, cases = corpus_tensorboard
    status, document = get(f"{url}/data/plugin/op_compare/runs")
    assert status == 200
    errors = {error["path"]: error["message"] for error in document["errors"]}
    for case in cases:
        if case.reason:
            assert case.reason in errors[str(case.path)], case.run
    good = {run["run"] for run in document["runs"]}
    assert {case.run for case in cases if case.reason is None} <= good
    status, compared = get(f"{url}/data/plugin/op_compare/compare", baseline=GOOD_RUN, target="two_formats [pytorch]")
    assert status == 200 and compared["rows"]


@pytest.mark.parametrize("name", ERROR_CASES)
def test_api_compare_answers_422_with_the_reason(corpus_tensorboard, name):
    url, _, cases = corpus_tensorboard
    case = case_named(cases, name)
    status, document = get(f"{url}/data/plugin/op_compare/compare", baseline=GOOD_RUN, target=case.run)
    assert status == 422
    assert document["error"]["path"] == str(case.path) and case.reason in document["error"]["reason"]


@pytest.mark.parametrize(
    "params",
    [
        {"baseline": "../../../../etc/passwd"},
        {"target": "/etc/passwd"},
        {"baseline": "%2e%2e%2f%2e%2e%2fetc%2fpasswd"},
        {"baseline_session": "../../../../etc/passwd"},
        {"target_session": "/etc/shadow"},
        {"baseline": "odd_names_cpu_bs4/../../../etc"},
        {"group_by": "../name"},
        {"sort": "../key"},
    ],
)
def test_path_traversal_in_any_parameter_reads_nothing_outside(corpus_tensorboard, params):
    url, _, _ = corpus_tensorboard
    query = {"baseline": GOOD_RUN, "target": GOOD_RUN, **params}
    status, document = get(f"{url}/data/plugin/op_compare/compare", **query)
    assert status in (400, 404)
    assert "root:" not in json.dumps(document)


@pytest.mark.parametrize(
    "route",
    [
        "..%2F..%2Fpyproject.toml",
        "%2E%2E/%2E%2E/etc/passwd",
        "frontend/../setup.py",
        "index.js/..%2F..%2F..%2Fpyproject.toml",
        "sweep?model=..%2F..%2F",
    ],
)
def test_static_routes_serve_only_their_own_files(corpus_tensorboard, route):
    url, _, _ = corpus_tensorboard
    try:
        with urllib.request.urlopen(f"{url}/data/plugin/op_compare/{route}", timeout=30) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        body, status = error.read(), error.code
    assert b"[project]" not in body and b"root:" not in body
    assert status in (400, 404) or route.startswith("sweep")


# The API answers every case (above); the tab's panel shows whatever message it gets, so
# one case per kind of reader is enough there: a browser page per case cost a minute of CI.
BROWSER_CASES = ["tf23_truncated", "unescaped_quote", "summary_wrong_nesting", "no_op_events"]


def test_the_browser_cases_are_cases():
    assert set(BROWSER_CASES) <= set(ERROR_CASES)


@pytest.mark.parametrize("name", BROWSER_CASES)
def test_the_tab_shows_the_reason_in_its_error_panel(corpus_tensorboard, page, name):
    from conftest import open_op_compare

    url, _, cases = corpus_tensorboard
    case = case_named(cases, name)
    frame = open_op_compare(page, url, baseline=case.run, target=GOOD_RUN)
    message = frame.locator("#oc-message")
    message.wait_for()
    text = message.inner_text()
    assert "This profile cannot be read" in text
    assert str(case.path) in text and case.reason in text
    assert not page.page_errors
