"""ARCHITECTURE.md's layer rules, checked against every import of the package: a map that
cannot drift from the code it describes."""

from __future__ import annotations

import ast
import re

from conftest import REPO

PACKAGE = REPO / "tb_opcompare"


def _rules() -> dict[str, set[str]]:
    """Folder -> the folders it may import, from the ```layers block of ARCHITECTURE.md."""
    (block,) = re.findall(r"```layers\n(.*?)```", (REPO / "ARCHITECTURE.md").read_text(), flags=re.S)
    lines = [line.strip() for line in block.strip().splitlines()]
    order = [name.strip() for name in lines[0].split("<")]
    allowed = {name: set(order[:position]) for position, name in enumerate(order)}
    for line in lines[1:]:
        if "+=" in line:  # more for a folder of the order
            name, _, imports = line.partition("+=")
            allowed[name.strip()] |= {part.strip() for part in imports.split(",")}
        else:  # a folder outside the order, with what it may import
            name, _, imports = line.partition(":")
            allowed[name.strip()] = {part.strip() for part in imports.split(",")}
    return allowed


def _imports() -> list[tuple[str, str, str]]:
    """(folder of the importing module, folder imported, the module's path) of every
    import between the package's folders (module-level and inside functions)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:
            continue  # the package's own __init__ (its version) sits below every folder
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                pieces = name.split(".")
                if pieces[0] == "tb_opcompare" and len(pieces) > 1 and pieces[1] != parts[0]:
                    found.append((parts[0], pieces[1], str(path.relative_to(REPO))))
    return found


def test_every_import_follows_the_layers_architecture_md_states():
    allowed = _rules()
    folders = {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"} - {"frontend"}
    assert folders <= set(allowed), f"folders ARCHITECTURE.md does not place: {sorted(folders - set(allowed))}"
    wrong = [
        f"{path}: {folder} imports {target}"
        for folder, target, path in _imports()
        if target not in allowed[folder] and target != "errors"  # every layer may raise the error types
    ]
    assert wrong == []


def test_the_rules_can_fail():
    """The check sees an import that climbs back up (so it is not vacuous)."""
    allowed = _rules()
    assert "service" not in allowed["store"] and "web" not in allowed["service"]
    assert ("ingest", "analysis", "tb_opcompare/ingest/readers/torch_trace.py") in _imports()


# What reads files, sidecars or profiles: the store's to call, never a service's.
_FILE_READERS = {"tb_opcompare.ingest.fs", "tb_opcompare.ingest.readers"}
_FILE_READING_NAMES = {"fs", "read_claims", "sidecar_field", "read_profile", "discover", "readers"}


def _service_file_reads() -> list[str]:
    found = []
    for path in sorted((PACKAGE / "service").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tb_opcompare.ingest"):
                names = {alias.name for alias in node.names}
                if any(node.module.startswith(module) for module in _FILE_READERS) or names & _FILE_READING_NAMES:
                    found.append(f"{path.name}: from {node.module} import {', '.join(sorted(names))}")
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.name}: import {alias.name}"
                    for alias in node.names
                    if any(alias.name.startswith(module) for module in _FILE_READERS)
                ]
    return found


def test_services_ask_the_store_and_open_no_file():
    """A service takes a run's facts, claims and groups from the catalog (one reading of
    each sidecar, one rule), never from the files."""
    assert _service_file_reads() == []


MAX_FUNCTION_LINES = 60
MAX_PRIVATE_PARAMETERS = 6


def _functions() -> list[tuple[str, int, int, bool]]:
    """(where, lines, parameters, private) of every function and method of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                names = [arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
                names += [arg.arg for arg in (args.vararg, args.kwarg) if arg]
                count = len([name for name in names if name not in ("self", "cls")])
                private = node.name.startswith("_") and not node.name.startswith("__")
                where = f"{path.relative_to(REPO)}:{node.lineno} {node.name}"
                found.append((where, node.end_lineno - node.lineno + 1, count, private))
    return found


def test_functions_are_small_steps():
    """Every function reads in one screen, and a private step takes at most six values
    (more travel together as one small record). Public functions that mirror a user's
    options (the recorders, the documents' query parameters) may take more, by keyword."""
    functions = _functions()
    assert len(functions) > 500  # the walk sees the package
    long = [f"{where}: {lines} lines" for where, lines, _, _ in functions if lines > MAX_FUNCTION_LINES]
    wide = [
        f"{where}: {count} parameters"
        for where, _, count, private in functions
        if private and count > MAX_PRIVATE_PARAMETERS
    ]
    assert long == [] and wide == []


def _diagram() -> str:
    """ARCHITECTURE.md's drawing of the folders (its first code block)."""
    return re.search(r"```\n(.*?)```", (REPO / "ARCHITECTURE.md").read_text(), flags=re.S).group(1)


def test_the_map_draws_the_layers_in_the_order_the_rule_enforces():
    """The drawing lists the folders top down in the order imports go: the rule the test
    above checks, so the picture a reader meets first is the one the code follows."""
    (block,) = re.findall(r"```layers\n(.*?)```", (REPO / "ARCHITECTURE.md").read_text(), flags=re.S)
    order = [name.strip() for name in block.strip().splitlines()[0].split("<")]
    drawn = [
        match.group(1)
        for match in re.finditer(r"^ (\w+)(?:/|\.py)\s", _diagram(), flags=re.M)
        if match.group(1) in order
    ]
    assert drawn == order


def test_the_map_names_every_module_and_only_modules_that_exist():
    """Each folder's modules are all named in the drawing, and every path the document
    names (`folder/module.py`) is there: a module added, moved or removed fails here until
    the map says so."""
    diagram = _diagram()
    words = set(re.findall(r"[\w*]+", diagram))
    for folder in ("schema", "analysis", "ingest", "store", "service", "web", "cli"):
        modules = {path.stem for path in (PACKAGE / folder).glob("*.py")} - {"__init__", "__main__"}
        assert modules <= words, f"{folder}/ modules missing from the map: {sorted(modules - words)}"
    text = (REPO / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`((?:tb_opcompare/)?(?:[\w]+/)+[\w.]+\.(?:py|js|md|json))`", text))
    missing = [
        path for path in sorted(named) if not any((base / path).exists() for base in (REPO, PACKAGE, REPO / "frontend"))
    ]
    assert len(named) > 30 and missing == []


def test_the_map_lists_every_error_type():
    """The table of error types names each exception class errors.py defines."""
    tree = ast.parse((PACKAGE / "errors.py").read_text())
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    listed = set(re.findall(r"^\s*\| `(\w+)`", (REPO / "ARCHITECTURE.md").read_text(), flags=re.M))
    assert defined and defined <= listed


def test_no_analysis_signature_takes_two_table_types():
    """One table type through analysis/: no parameter is annotated ``Table | pd.DataFrame``."""
    both = re.compile(r"Table\s*\|\s*pd\.DataFrame|pd\.DataFrame\s*\|\s*Table")
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if both.search(line)
    ]
    assert found == []


def _walk(call) -> list[tuple[str, str, list[str]]]:
    """Every call into the package made by ``call()``: (module, function, the package's
    modules on the stack below it, innermost last)."""
    import sys

    calls, stack = [], []

    def profile(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("tb_opcompare"):
                calls.append((module, frame.f_code.co_name, [m for m in stack if m.startswith("tb_opcompare")]))
            stack.append(module)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return calls


def test_one_compare_request_walks_down_the_layers_once(tmp_path):
    """The walk ARCHITECTURE.md's "One request" describes, traced on a warm compare request
    of the tab: no module is entered again below itself (no call runs back up the page and
    down again), no call goes up a layer, and the request opens no sidecar and applies no
    naming rule (what a run claims is the store's, read once a listing: it was read again
    for every run of the logdir on each request). The module count is the map's, kept from
    growing by this test."""
    import shutil

    from in_process import PREFIX, plugin_client

    for run in ("mnist_cnn_torch_cpu_bs1", "mnist_cnn_torch_cpu_bs16"):
        shutil.copytree(REPO / "demo_logs" / "torch" / run, tmp_path / run)
    client = plugin_client(tmp_path)
    url = f"{PREFIX}/compare?baseline=mnist_cnn_torch_cpu_bs16&target=mnist_cnn_torch_cpu_bs1"
    assert client.get(url).status_code == 200  # both runs read: the walk is of a warm request
    answers = []
    calls = _walk(lambda: answers.append(client.get(url)))
    assert answers[0].status_code == 200 and b'"rows"' in answers[0].data
    order = [
        name.strip() for name in re.findall(r"```layers\n(.*?)\n", (REPO / "ARCHITECTURE.md").read_text())[0].split("<")
    ]

    def layer(module: str) -> int:
        parts = module.split(".")
        return order.index(parts[1]) if len(parts) > 1 and parts[1] in order else -1

    again = {(module, function) for module, function, below in calls if module in below and below[-1] != module}
    assert again == set(), f"modules entered again below themselves: {sorted(again)}"
    up = {(below[-1], module) for module, _, below in calls if below and layer(module) > layer(below[-1])}
    assert up == set(), f"calls up a layer: {sorted(up)}"
    modules = {module for module, _, _ in calls}
    assert not modules & {"tb_opcompare.ingest.sidecar", "tb_opcompare.ingest.naming"}
    assert {"tb_opcompare.service.compare", "tb_opcompare.analysis.compare", "tb_opcompare.store.catalog"} <= modules
    # 24, then the reads' collector rule (ingest.formats) and the streamed JSON (service.records)
    assert len(modules) <= 26, "\n".join(sorted(modules))


def test_the_names_the_map_gives_beside_a_module_are_defined_there():
    """Where the map names a function, class or constant right after its module
    (`` `store/catalog.py` `Catalog.load` ``), the module defines it: a reader following
    the map to a rule finds it there (a rename or a move fails this test)."""
    doc = (REPO / "ARCHITECTURE.md").read_text()
    pairs = re.findall(r"`((?:\w+/)*\w+\.py)` \(?`([\w.]+)`", doc)
    assert len(pairs) >= 20  # the map names its rules this way: the check is not vacuous
    missing = []
    for path, name in pairs:
        module = PACKAGE / path if (PACKAGE / path).exists() else REPO / path
        defined = set()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined |= {target.id for target in node.targets if isinstance(target, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)
        if name.split(".")[0] not in defined:
            missing.append(f"{path} `{name}`")
    assert missing == []
