"""Golden outputs: every document the tab and the CLI produce on the demo logdir and the
fixtures, as committed in ``tests/golden/``, compared by meaning (``golden_compare``):
structure, keys, order and text exactly, numbers to 1e-9 relative, the status line and a
CSV's header byte for byte. The last digits of a float move with the BLAS kernel, the CPU
and the numpy release; nothing a user can see does.

They pin behaviour across refactoring: a change that moves code must leave every output
alone. A change that means to alter an output regenerates them and shows the diff in
its commit::

    .venv/bin/python tests/test_golden.py --write

Paths of the logdir are written as ``<logdir>`` and the plugin's version as
``<version>``, so the files do not depend on where the checkout is or its version.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sys
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import FIXTURES, LOGDIR, REPO, build_plugin_logdir  # noqa: E402
from golden_compare import differences  # noqa: E402
from in_process import PREFIX, plugin_client  # noqa: E402

from tb_opcompare import __version__  # noqa: E402

GOLDEN = Path(__file__).parent / "golden"

# name -> how to make the logdir in a scratch folder (copies, so nothing is written beside
# the fixtures and the paths in the documents are the scratch folder's)
LOGDIRS = {
    "demo_logs": lambda root: _copy(REPO / "demo_logs", root / "demo_logs"),
    "fixtures": lambda root: build_plugin_logdir(root),
    "gpu_h100_demo": lambda root: _copy(FIXTURES / "gpu_h100" / "demo", root / "gpu_h100_demo"),
    "gpu_h100_zoo": lambda root: _copy(FIXTURES / "gpu_h100" / "zoo", root / "gpu_h100_zoo"),
    "summary_json": lambda root: _copy(FIXTURES / "summary_json", root / "summary_json"),
    "tf_trace_json": lambda root: _copy(FIXTURES / "tf_trace_json", root / "tf_trace_json"),
}
MAX_PAIRS = 4  # compare documents for the first pairs of each logdir (each has three views)
VIEW = {"q": "conv", "sort": "speedup", "order": "asc", "top": "5", "status": "matched,target_only"}


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.md"))
    return target


def outputs(logdir: Path) -> dict[str, bytes]:
    """Every output of the routes and the CLI on ``logdir``, by a file name."""
    found: dict[str, bytes] = {}
    client = plugin_client(logdir)
    # The commands share a cache, as a user's do: the first reads the profiles and fills
    # it, the others read it, so the files pin the cold and the cached reads alike.
    cache = logdir.parent / "cli-cache"

    def get(name: str, route: str, **params):
        response = client.get(PREFIX + route + ("?" + urllib.parse.urlencode(params, doseq=True) if params else ""))
        found[name] = (
            f"{response.status_code} {response.headers.get('Content-Disposition', '')}\n".encode() + response.get_data()
        )

    get("runs_lazy.json", "/runs", load="0")  # before any read: names and sidecars only
    get("runs.json", "/runs")
    runs = json.loads(found["runs.json"].split(b"\n", 1)[1])
    for number, pair in enumerate(runs["pairs"][:MAX_PAIRS]):
        ends = {"baseline": pair["baseline"], "target": pair["target"]}
        get(f"pair{number}_compare.json", "/compare", **ends)
        get(f"pair{number}_compare_by_type.json", "/compare", group_by="type", **ends)
        get(f"pair{number}_compare_view.json", "/compare", **ends, **VIEW)
        get(f"pair{number}_compare.csv", "/compare.csv", **ends)
    if runs["pairs"]:  # the first pair's ops on their rooflines (issue 54)
        ends = {"baseline": runs["pairs"][0]["baseline"], "target": runs["pairs"][0]["target"]}
        get("pair0_roofline.json", "/roofline", **ends)
        get("pair0_roofline.csv", "/roofline.csv", **ends)
        found["cli_roofline.txt"] = _cli(
            "roofline", str(logdir), "--baseline", ends["baseline"], "--target", ends["target"], cache=cache
        )
    get("sweeps.json", "/sweeps")
    sweeps = json.loads(found["sweeps.json"].split(b"\n", 1)[1])
    for number, model in enumerate(sweeps["sweepable"]):
        get(f"sweep{number}.json", "/sweep", model=model)
        get(f"sweep{number}.csv", "/sweep.csv", model=model)
    found["cli_runs.txt"] = _cli("runs", str(logdir), cache=cache)
    found["cli_compare.txt"] = _cli("compare", str(logdir), "--top", "8", cache=cache)
    found["cli_compare_all_pairs.txt"] = _cli("compare", str(logdir), "--top", "3", "--all-pairs", cache=cache)
    found["cli_sweep.txt"] = _cli("sweep", str(logdir), cache=cache)
    for number, model in enumerate(sweeps["sweepable"]):
        found[f"cli_sweep{number}.txt"] = _cli("sweep", str(logdir), "--model", model, "--top", "5", cache=cache)
    return {name: _portable(data, logdir) for name, data in found.items()}


def _cli(*argv: str, cache: Path) -> bytes:
    from tb_opcompare.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # --quiet: progress lines depend on how fast the machine reads
        code = main([*argv, "--cache-dir", str(cache), "--quiet"])
    return f"exit {code}\n{out.getvalue()}--- stderr\n{err.getvalue()}".encode()


def _portable(data: bytes, logdir: Path) -> bytes:
    for path, placeholder in ((str(logdir), "<logdir>"), (json.dumps(str(logdir))[1:-1], "<logdir>")):
        data = data.replace(path.encode(), placeholder.encode())
    return data.replace(f'"version":"{__version__}"'.encode(), b'"version":"<version>"')


def _made(name: str, root: Path) -> Path:
    root.mkdir(parents=True)
    return LOGDIRS[name](root)


@pytest.mark.parametrize("name", sorted(LOGDIRS))
def test_outputs_match_the_golden_files(name, tmp_path):
    produced = outputs(_made(name, tmp_path / name))
    folder = GOLDEN / name
    committed = {path.name: path.read_bytes() for path in folder.iterdir()} if folder.is_dir() else {}
    assert sorted(produced) == sorted(committed), (
        f"{folder}: outputs made and files committed differ; regenerate with `python tests/test_golden.py --write`"
    )
    changed = {
        file: found for file in sorted(produced) if (found := differences(file, committed[file], produced[file]))
    }
    if changed:
        report = "\n".join(f"{folder / file}:\n  " + "\n  ".join(found) for file, found in list(changed.items())[:5])
        pytest.fail(
            f"{len(changed)} of {len(produced)} outputs changed in meaning ({', '.join(changed)}); "
            f"regenerate with `python tests/test_golden.py --write` if the change is meant:\n{report}"
        )


def write_all() -> None:
    """Writes only the outputs whose meaning changed (and removes those no longer made),
    so regenerating on another machine leaves the last digits of the committed files
    alone and the commit shows only real changes."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for name in sorted(LOGDIRS):
            folder = GOLDEN / name
            folder.mkdir(parents=True, exist_ok=True)
            produced = outputs(_made(name, Path(scratch) / name))
            for stale in set(path.name for path in folder.iterdir()) - set(produced):
                (folder / stale).unlink()
            written = 0
            for file, data in produced.items():
                path = folder / file
                if not path.is_file() or differences(file, path.read_bytes(), data):
                    path.write_bytes(data)
                    written += 1
            print(
                f"{folder}: {len(produced)} files ({written} rewritten), "
                f"{sum(map(len, produced.values())) / 1e3:,.0f} kB"
            )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    assert LOGDIR.is_dir()
    write_all()
