from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

# Parsed-profile cache of this test session (the CLI and TensorBoard processes inherit
# it), so tests never touch ~/.cache, nor a cache the runner's environment names: a fixture
# rewritten at its size under one file time (CI gives every file one) would be served stale.
_TEST_CACHE = __import__("tempfile").mkdtemp(prefix="opcompare-test-cache-")
os.environ["TB_OPCOMPARE_CACHE_DIR"] = _TEST_CACHE
__import__("atexit").register(shutil.rmtree, _TEST_CACHE, ignore_errors=True)
# What the recording helpers and the cache read from the environment: set by a user's shell,
# they would change what the tests record and keep. The suite's own knobs (fuzz examples,
# load seconds) and the pure-Python switch (same answers, slower) stay.
for _variable in (
    "TB_OPCOMPARE_PROFILE",
    "TB_OPCOMPARE_MODEL",
    "TB_OPCOMPARE_DEVICE",
    "TB_OPCOMPARE_BATCH_SIZE",
    "TB_OPCOMPARE_RUN_DIR",
    "TB_OPCOMPARE_REPEAT",
    "TB_OPCOMPARE_MATRIX",
    "TB_OPCOMPARE_CACHE_MAX_GB",
):
    os.environ.pop(_variable, None)

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent
# Public traces live beside the checkout, never in it (../shared/README.md), or where
# $OPCOMPARE_REALTRACES says.
REALTRACES = Path(os.environ.get("OPCOMPARE_REALTRACES") or REPO.parent / "shared" / "realtraces")
REALTRACES_FOUND = (REALTRACES / "SOURCES.md").is_file()
# `make check` (the fast tier) runs without them: the tests that need them are skipped
# there, each naming the path. `make test` (and CI) never skips them: a missing folder
# stops the run before it starts.
OPTIONAL_REALTRACES = os.environ.get("OPCOMPARE_REALTRACES_OPTIONAL") == "1"
MISSING_REALTRACES = (
    f"the public real traces are missing: expected them in {REALTRACES} (the shared/ folder beside this "
    "checkout, or $OPCOMPARE_REALTRACES). Tests read them there and never copy them into the repository."
)
if not REALTRACES_FOUND and not OPTIONAL_REALTRACES:
    raise pytest.UsageError(MISSING_REALTRACES)


def _build_logdir() -> Path:
    """The test logdir: this project's own recordings (tests/fixtures/logdir) plus the
    public TF1 CPU/GPU timeline pair from ../shared/realtraces as ``tf1/mlp_{cpu,gpu}``,
    copied into a temporary folder for this test session."""
    import atexit
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="opcompare-test-logdir-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    logdir = root / "logdir"
    shutil.copytree(FIXTURES / "logdir", logdir)
    for device in ("cpu", "gpu") if REALTRACES_FOUND else ():
        shutil.copytree(REALTRACES / "tf1_timeline_mlp_cpu_vs_gpu" / device, logdir / "tf1" / f"mlp_{device}")
    return logdir


# Fixtures whose logdirs hold public traces (the test logdir holds the public TF1 pair)
_REALTRACE_FIXTURES = {"logdir", "plugin_logdir", "tensorboard_url"}


def _needs_realtraces(item) -> bool:
    """A test reads the public traces if its module or its own code names them (or the
    test logdir), or it takes a fixture whose logdir holds them."""
    module = getattr(item, "module", None)
    names = set(getattr(getattr(item, "function", None), "__code__", None) and item.function.__code__.co_names or ())
    return (
        getattr(module, "REALTRACES", None) is not None
        or getattr(module, "LOGDIR", None) is not None
        or bool({"REALTRACES", "LOGDIR"} & names)
        or bool(_REALTRACE_FIXTURES & set(getattr(item, "fixturenames", ())))
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _needs_realtraces(item):
            item.add_marker(pytest.mark.realtraces)
            if not REALTRACES_FOUND:
                item.add_marker(pytest.mark.skip(reason=MISSING_REALTRACES))


LOGDIR = _build_logdir()


@pytest.fixture(scope="session")
def logdir() -> Path:
    return LOGDIR


def without_read_from(value):
    """A document without its runs' ``read_from``: the numbers of a run read from the shared
    index and of one read from its profile are the same; only where they came from differs."""
    if isinstance(value, dict):
        return {key: without_read_from(item) for key, item in value.items() if key != "read_from"}
    if isinstance(value, list):
        return [without_read_from(item) for item in value]
    return value


def read_bytes(path) -> bytes:
    return Path(path).read_bytes()


def profiler_step_durations(run: Path) -> list[float]:
    """Independent of the reader: each ProfilerStep#N's longest range (µs) in a PyTorch
    raw trace (``run``: the trace, or a run folder holding one), in the order the steps
    started."""
    import gzip
    import json

    (path,) = run.glob("*.pt.trace.json*") if run.is_dir() else (run,)
    data = path.read_bytes()
    ranges: dict[str, tuple[float, float]] = {}
    for event in json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)["traceEvents"]:
        name = event.get("name", "")
        if event.get("ph") == "X" and name.startswith("ProfilerStep#"):
            if name not in ranges or event["dur"] > ranges[name][1]:
                ranges[name] = (event["ts"], event["dur"])
    return [duration for _, duration in sorted(ranges.values())]


def steady_steps(durations: list[float]) -> list[float]:
    """The headline's steps, written out apart from the code: the leading steps each
    slower than 1.5x the median of the steps after them (at most half of all) are
    warm-up; the rest are steady."""
    import statistics

    skip = 0
    while skip < len(durations) // 2 and durations[skip] > 1.5 * statistics.median(durations[skip + 1 :]):
        skip += 1
    return durations[skip:]


def steady_median(durations: list[float]) -> float:
    """The headline's step time of one run: the median of its steady steps."""
    import statistics

    return statistics.median(steady_steps(durations))


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint, for tests that write wire bytes by hand."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def run_cli(*args: str, cwd: Path | None = None):
    """Run the installed ``tb-opcompare`` console script for real."""
    import subprocess

    executable = Path(sys.executable).parent / "tb-opcompare"
    return subprocess.run(
        [str(executable), *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )


HOSTILE = FIXTURES / "hostile"
MALFORMED = FIXTURES / "malformed"
TRUNCATED_RUN = "broken/cnn_cpu_truncated/train"
TWO_SESSION_RUN = "reprofiled/cnn_cpu/train"  # two captures: the bs8 one, then the bs32 one
BIG_RUN = "big/bert_multigpu"  # a real TF 2.4 BERT xplane with 4,696 ops


def build_plugin_logdir(root: Path) -> Path:
    """The fixture logdir plus a hostile-names run, a real profile with thousands of ops,
    and two unreadable runs: a real PyTorch trace that is invalid JSON, and a real
    xplane cut to 40% of its bytes."""

    logdir = root / "logdir"
    shutil.copytree(LOGDIR, logdir)
    shutil.copytree(HOSTILE, logdir / "torch", dirs_exist_ok=True)
    shutil.copytree(MALFORMED, logdir / "broken", dirs_exist_ok=True)
    shutil.copytree(REALTRACES / "tf2_xplane_bert_multigpu", logdir / BIG_RUN)
    for batch_size, session in ((8, "2026_01_05_09_00_00"), (32, "2026_01_06_09_00_00")):
        capture = next((LOGDIR / f"tf_keras/cnn_cpu_bs{batch_size}/train/plugins/profile").glob("*/vm.xplane.pb"))
        target = logdir / TWO_SESSION_RUN / "plugins/profile" / session / "vm.xplane.pb"
        target.parent.mkdir(parents=True)
        shutil.copyfile(capture, target)
    source = next((LOGDIR / "tf_keras/cnn_cpu_bs8/train/plugins/profile").glob("*/vm.xplane.pb"))
    truncated = logdir / TRUNCATED_RUN / "plugins/profile" / source.parent.name / "vm.xplane.pb"
    truncated.parent.mkdir(parents=True)
    data = source.read_bytes()
    truncated.write_bytes(data[: len(data) * 2 // 5])
    return logdir


@pytest.fixture(scope="session")
def plugin_logdir(tmp_path_factory) -> Path:
    return build_plugin_logdir(tmp_path_factory.mktemp("plugin"))


@pytest.fixture(scope="session")
def tensorboard_url(plugin_logdir):
    from tensorboard_server import running_tensorboard

    with running_tensorboard(plugin_logdir, tensorflow=True) as url:  # the tab beside a full TensorFlow install
        yield url


# Debian's Chromium, driven by Playwright (never a downloaded browser); `make test`
# installs it with apt-get when it is missing.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
    "--disable-background-networking",
    "--disable-component-update",
]


@contextlib.contextmanager
def tensorboard_on_copy(tmp_path_factory, source: Path, ignore=None):
    """A real TensorBoard serving a copy of ``source`` (its Profile plugin may write cache
    files beside profiles: never beside the repository's)."""
    from tensorboard_server import running_tensorboard

    logdir = tmp_path_factory.mktemp(source.name) / "logdir"
    shutil.copytree(source, logdir, ignore=ignore)
    with running_tensorboard(logdir) as url:
        yield url


def console_errors(page) -> list[str]:
    """The errors the page logs from now on. None is expected: a pair with one run a side,
    whose check the route would refuse, is told by the compare summary and never asked
    for (issue 51: every Compare load logged the check's 400)."""
    errors: list[str] = []

    def log(message):
        if message.type == "error":
            errors.append(f"{message.text} ({message.location.get('url', '')})")

    page.on("console", log)
    return errors


@pytest.fixture(scope="module")
def repeats_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of tests/fixtures/repeats: six runs of a CNN (model `cnn`) and
    six of a variant whose `head` region is made about 2x slower (model `cnnslow`)."""
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "repeats" / "logdir") as url:
        yield url


@pytest.fixture(scope="module")
def modules_tensorboard_url(tmp_path_factory):
    """TensorBoard on a copy of tests/fixtures/gpu_h100/modules: the demo's PyTorch CNN on
    an H100 with Python stacks (nn.Module calls)."""
    with tensorboard_on_copy(tmp_path_factory, FIXTURES / "gpu_h100" / "modules") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


VIEWPORT = {"width": 1500, "height": 1100}


def _new_page(browser):
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    # Playwright's default wait, 30 s, is short where two cores run two test files and their
    # servers (the suspected cause of test_tab_matrix's rare failures under load): 60 s, as
    # the tests' own waits for a table are.
    context.set_default_timeout(60_000)
    page = context.new_page()
    page.dialogs = []
    page.page_errors = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    page.on("pageerror", lambda error: page.page_errors.append(str(error)))
    return page


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report kept on its test (``item.failed_phases``), for fixtures to read."""
    report = (yield).get_result()
    if report.failed:
        item.failed_phases = {*getattr(item, "failed_phases", ()), report.when}


@pytest.fixture(scope="module")
def _module_pages(browser):
    pages: list = []
    yield pages
    for page in pages:
        page.context.close()


@pytest.fixture
def page(browser, _module_pages, request):
    """A browser page that a module's tests pass on, one to the next, so that TensorBoard's
    own page loads once per module and server: it costs Chromium 3 s of CPU, most of a test's,
    and `open_op_compare` loads only the tab's frame again where TensorBoard already shows.
    Nothing else passes on: each test starts without the dialogs, errors, routes, size or tab
    state of the one before (`open_op_compare` empties the tab's sessionStorage), and a test
    that fails hands on nothing: its page is closed, and the next test gets a new one."""
    if not _module_pages:
        _module_pages.append(_new_page(browser))
    page = _module_pages[0]
    page.dialogs.clear()
    page.page_errors.clear()
    yield page
    if getattr(request.node, "failed_phases", None) or page.is_closed() or not _server_answers(page.url):
        _module_pages.pop().context.close()
        return
    page.unroute_all(behavior="ignoreErrors")
    page.set_viewport_size(VIEWPORT)


def _server_answers(url: str) -> bool:
    """Whether the server of the page's URL still answers: a page showing a TensorBoard that
    stopped is not passed on (another could take its port, and a test would see the old one)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return True
    try:
        with urllib.request.urlopen(f"{parts.scheme}://{parts.netloc}/data/plugins_listing", timeout=5):
            return True
    except urllib.error.HTTPError:  # an answer all the same (a path prefix, say)
        return True
    except OSError:
        return False


TAB_FRAME = "iframe[src*='plugin_entry.html?name=op_compare']"


def _fragment(state: dict) -> str:
    """TensorBoard's hash showing the Op Compare tab with ``state``."""
    import urllib.parse

    return "#op_compare" + "".join(
        f"&{urllib.parse.quote('p.op_compare.' + key)}={urllib.parse.quote(str(value), safe='')}"
        for key, value in state.items()
    )


def open_op_compare(page, url: str, ready: str = "#oc-count, #oc-message, #oc-empty", **state):
    """Open TensorBoard on the Op Compare tab with `state` in the URL; return the plugin's
    frame once `ready` shows. Where `page` shows that TensorBoard already (a page a test
    passed on), only the tab's frame loads again, with none of the tab's state kept: the
    tab opens as from a link."""
    if _shows_the_tab(page, url):
        return _load_the_frame_again(page, ready, state, forget=True)
    page.goto(f"{url}/{_fragment(state)}")
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(ready).first.wait_for(timeout=60_000)
    return frame


def _shows_the_tab(page, url: str) -> bool:
    if not page.url.startswith(f"{url}/"):
        return False
    frame = page.query_selector(TAB_FRAME)
    return frame is not None and frame.content_frame() is not None


def reopen_op_compare(page, ready: str = "#oc-count, #oc-message, #oc-empty", **state):
    """The tab opened cold again on `state` in the TensorBoard page already showing it:
    the tab's frame emptied, the hash set, and the frame loaded again, a fresh document
    that reads the hash as it reads a shared link. TensorBoard's own page stays: loading
    it costs Chromium 3 s of CPU, most of a cold page's cost."""
    return _load_the_frame_again(page, ready, state, forget=False)


def _load_the_frame_again(page, ready: str, state: dict, forget: bool):
    document = page.locator(TAB_FRAME).element_handle().content_frame()
    source = document.url
    document.goto("about:blank")  # the old document gone first: it may write the hash as it goes
    if forget:  # and the state it keeps for the browser tab (frontend/state.js)
        page.evaluate("sessionStorage.clear()")
    page.evaluate("fragment => { window.location.hash = fragment; }", _fragment(state))
    document.goto(source)
    frame = page.frame_locator(TAB_FRAME)
    frame.locator(ready).first.wait_for(timeout=60_000)
    return frame


def route(url: str, name: str, params=(), **named) -> tuple[int, bytes]:
    """A plugin route's status and body from a running TensorBoard, errors included;
    ``params`` a dict or a list of pairs (to repeat a name), ``named`` more of them."""
    import urllib.error
    import urllib.parse
    import urllib.request

    query = urllib.parse.urlencode(
        [*(params.items() if isinstance(params, dict) else params), *named.items()], doseq=True
    )
    try:
        with urllib.request.urlopen(f"{url}/data/plugin/op_compare/{name}?{query}") as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def route_json(url: str, name: str, params=(), **named):
    """A route's JSON document, which must answer 200 (as ``route`` takes parameters)."""
    import json

    status, body = route(url, name, params, **named)
    assert status == 200, body
    return json.loads(body)


def tab_state(page) -> dict[str, str]:
    """The tab's state as its URL fragment holds it (``p.op_compare.<key>=<value>``)."""
    import urllib.parse

    pairs = [part.split("=", 1) for part in page.evaluate("location.hash").lstrip("#").split("&") if "=" in part]
    return {
        urllib.parse.unquote(k)[len("p.op_compare.") :]: urllib.parse.unquote(v)
        for k, v in pairs
        if urllib.parse.unquote(k).startswith("p.op_compare.")
    }


def as_json(document):
    """A service's document as the JSON values a user receives (what the routes and
    ``--json`` encode), so tests assert on what users see."""
    import msgspec

    return msgspec.to_builtins(document)


@pytest.fixture(params=["c", "python"])
def both_ways(request, monkeypatch) -> str:
    """Each optional C helper, then the Python code it speeds up (``TB_OPCOMPARE_PURE_PYTHON``)."""
    from tb_opcompare import native

    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1" if request.param == "python" else "")
    return request.param


def assert_built_and_switchable(loaded, name: str, user: str) -> None:
    """The optional C helper ``name`` (``loaded``: what module ``user`` holds of it) is built
    in this environment, beside ``user``, so that a missing compiler never leaves the suite
    testing only the Python code; and ``TB_OPCOMPARE_PURE_PYTHON`` turns it off."""
    import importlib

    from tb_opcompare import native

    compiled = importlib.import_module(name)
    assert loaded is compiled
    assert Path(compiled.__file__).parent == Path(importlib.import_module(user).__file__).parent
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(native.PURE_PYTHON_ENV, raising=False)
        assert native.wanted(loaded) is compiled
        patch.setenv(native.PURE_PYTHON_ENV, "1")
        assert native.wanted(loaded) is None


def assert_same_read(got, expected) -> None:
    """Two ways of reading one file (a reader's C helper and its Python code) gave the same:
    the same error, or every table bit for bit (0.0 and -0.0 pass pandas' check, not this),
    the same facts and steps."""
    import pandas as pd

    if isinstance(expected, Exception) or isinstance(got, Exception):
        assert type(got) is type(expected) and str(got) == str(expected)
        return
    for name in ("op_table", "step_table", "module_table", "annotation_table", "memory_table", "work_table"):
        want, have = getattr(expected, name).frame(), getattr(got, name).frame()
        pd.testing.assert_frame_equal(have, want, check_exact=True, obj=name)
        for column in want.columns:
            if want[column].dtype.kind in "biuf":
                assert have[column].to_numpy().tobytes() == want[column].to_numpy().tobytes(), f"{name}.{column}"
    assert vars(got.facts) == vars(expected.facts)
    assert got.step_count == expected.step_count
