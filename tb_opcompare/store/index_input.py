"""The shared index read as untrusted input. Whoever may write the logdir may write its
``.opcompare/`` (a teammate's script, another tool, a disk that tore a write), and every
process that reads the logdir reads it: before, one manifest of 300,000 nested ``[``, one
``batch_size`` of ``"sixty-four"`` or one ``steps`` row pointing past its table ended
``runs``, ``compare``, ``index`` and ``check`` in a traceback and the tab in HTTP 500.

So nothing is taken from the index before it is checked against the schema this version
writes: the manifest's size and nesting before it is parsed, then each entry alone (types
by msgspec, then ranges), and each part's size, schema and values before its rows are
used. A bad manifest costs the index (every run is read from its profile), a bad entry or
part costs its run (read from its profile), each with a notice naming it; never another.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from typing import Annotated, Literal

import msgspec

from tb_opcompare.errors import escape_undecodable
from tb_opcompare.schema.contract import WorkerRecord
from tb_opcompare.schema.events import ProfileFacts
from tb_opcompare.schema.index_tables import PROFILE_TABLES, RUNS, table_schema

# The manifest's deepest value is 7 levels down (document, sessions, entry, facts, workers,
# a worker, its values); past this it is no manifest this tool wrote, and parsing it would
# recurse once a level (300,000 ``[`` ended in a RecursionError)
MAX_DEPTH = 32
# A manifest entry is about 1.5 KB: this holds some 300,000 sessions. Parsed, JSON takes
# about this many bytes of memory a byte of text (dicts, strings and floats as objects)
MANIFEST_MAX_BYTES = 512 << 20
JSON_PEAK_PER_BYTE = 10
# A part's rows: the biggest real profile indexed (a 4,696-op BERT xplane) has 10^5 step
# rows; each row of a text column becomes a Python string of about this many bytes
PART_MAX_ROWS = 50_000_000
STRING_BYTES = 64
# Profiled steps a session's per-step table is placed in: views allocate ops x steps cells
MAX_STEPS = 1_000_000
# A sidecar is a few hundred bytes: the index keeps a copy of one up to this size
SIDECAR_KEPT_BYTES = 4096

_PART = r"^[0-9a-f]{24}$"
_Count = Annotated[int, msgspec.Meta(ge=0)]


class _Head(msgspec.Struct):
    markers: list[str]
    rank: tuple[int, int, str | None] | None = None  # ingest.workers.Rank's fields


class _File(msgspec.Struct):
    path: Annotated[str, msgspec.Meta(min_length=1)]
    size: _Count
    mtime: float
    etag: str | None = None
    ends_sha256: str | None = None
    content_blake2b: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")] | None = None
    head: _Head | None = None


class _Sidecar(msgspec.Struct):
    """The run's sidecar as it was indexed: the listing uses its text where the sidecar
    the bucket lists now has the same size, time and tag (``SharedIndex.known_sidecars``)."""

    path: Annotated[str, msgspec.Meta(min_length=1)]
    size: _Count
    mtime: float
    text: Annotated[str, msgspec.Meta(max_length=SIDECAR_KEPT_BYTES)]
    etag: str | None = None


class _Error(msgspec.Struct):
    path: str
    reason: str


class _Version(msgspec.Struct):
    """What tells whether an entry is this version's (and so must be read, and checked)."""

    schema: object = None
    reader: object = None


class _Entry(msgspec.Struct):
    """A manifest entry as ``SharedIndex.make_entry`` and ``write_manifest`` write it."""

    part: Annotated[str, msgspec.Meta(pattern=_PART)]
    run: str
    session: str
    format: str
    files: Annotated[list[_File], msgspec.Meta(min_length=1)]
    schema: int
    reader: str
    tool: str = ""
    # where its tables are (index schema 2): byte ranges of its batch's bundle, by table
    batch: Annotated[str, msgspec.Meta(pattern=_PART)] | None = None
    tables: dict[Literal[tuple([RUNS, *PROFILE_TABLES])], tuple[_Count, _Count]] = msgspec.field(  # type: ignore[valid-type]  # the tables' names written once, a Literal to msgspec
        default_factory=dict
    )
    error: _Error | None = None
    facts: ProfileFacts | None = None
    step_count: Annotated[int, msgspec.Meta(ge=0, le=MAX_STEPS)] = 0
    # what a listing shows of the session besides its facts (schema 2): its ops' names, which
    # pairing and model identity compare runs by, and its run's sidecar
    op_names: Annotated[list[str], msgspec.Meta(max_length=PART_MAX_ROWS)] | None = None
    sidecar: _Sidecar | None = None


class IndexInputError(ValueError):
    """A manifest, an entry or a part that is not what this version writes, and why."""


@dataclasses.dataclass
class Manifest:
    """A manifest read: ``entries`` of this version, checked, by part; ``foreign``: other
    versions' entries, kept as read, for the writer to keep; ``notices``: each entry left
    out, named, and why."""

    entries: dict[str, dict]
    foreign: dict[str, dict]
    notices: list[str]
    # an older schema's entries (another layout), as read: never used, their parts deleted
    # when this version writes the manifest anew
    older: dict[str, dict] = dataclasses.field(default_factory=dict)
    # JSON files of the logdir found to be no profile when it was indexed (path below the
    # logdir -> its size, time and tag): a listing does not look into them again while unchanged
    not_traces: dict[str, dict] = dataclasses.field(default_factory=dict)


def manifest_budget(memory_bytes: int) -> int:
    """The most manifest text read: what ``MANIFEST_MAX_BYTES`` and the memory guard's limit
    (0: none) allow, parsed."""
    return min(MANIFEST_MAX_BYTES, memory_bytes // JSON_PEAK_PER_BYTE) if memory_bytes > 0 else MANIFEST_MAX_BYTES


def parse_manifest(data: bytes, most: int, current: tuple[int, str]) -> Manifest | None:
    """The manifest's entries, each checked alone; None for another schema's manifest.
    Raises IndexInputError where the document itself cannot be used: past ``most`` bytes,
    nested past ``MAX_DEPTH``, no JSON, no object of sessions. ``current``: this version's
    (index schema, reader version)."""
    if len(data) > most:
        raise IndexInputError(f"over {most / 1e6:,.0f} MB, more than this machine reads of an index (memory guard)")
    if not nests_within(data, MAX_DEPTH):
        raise IndexInputError(f"nested deeper than {MAX_DEPTH} levels, as no index is")
    try:
        document = json.loads(data)
    except ValueError as error:  # UnicodeDecodeError too
        raise IndexInputError(str(error)) from None
    if not isinstance(document, dict):
        raise IndexInputError("not a JSON object")
    sessions = document.get("sessions")
    if document.get("schema") != current[0]:
        return _other_schema(document.get("schema"), sessions, current[0])
    if not isinstance(sessions, dict):
        raise IndexInputError("its sessions are not a JSON object")
    manifest = Manifest({}, {}, [])
    manifest.not_traces = _not_traces(document.get("not_traces"), manifest.notices)
    for part, raw in sessions.items():
        version = msgspec.convert(raw, _Version) if isinstance(raw, dict) else _Version()
        if _foreign(version, current):
            manifest.foreign[part] = raw  # another tool version's: never read here, kept for it
            continue
        try:
            manifest.entries[part] = checked_entry(part, raw)
        except IndexInputError as error:
            manifest.notices.append(entry_notice(part, raw, str(error)))
    return manifest


class _FileVersion(msgspec.Struct):
    size: _Count
    mtime: float
    etag: str | None = None


def _not_traces(raw, notices: list[str]) -> dict[str, dict]:
    """The manifest's ``not_traces``, checked whole (a bad one costs only itself: those files
    are looked into again)."""
    if raw is None:
        return {}
    try:
        checked = msgspec.convert(raw, dict[str, _FileVersion])
    except msgspec.ValidationError as error:
        notices.append(
            escape_undecodable(f"the shared index's list of JSON files that are no profile cannot be used ({error})")
        )
        return {}
    return {path: msgspec.to_builtins(version) for path, version in checked.items()}


def _other_schema(schema, sessions, current: int) -> Manifest | None:
    """A manifest of another index schema: one of an older layout is named, never used, and
    rewritten (its parts deleted) by the next `index`; None for a newer one or none."""
    if not isinstance(schema, int) or isinstance(schema, bool) or not 0 < schema < current:
        return None
    older = {
        part: raw
        for part, raw in (sessions.items() if isinstance(sessions, dict) else ())
        if isinstance(part, str) and isinstance(raw, dict)
    }
    notice = (
        f"the shared index was written in an older layout (index schema {schema}, one file a session and "
        f"table); it is not used, and profiles are read instead: `tb-opcompare index LOGDIR` rewrites it "
        f"(schema {current}, which lists a logdir from its manifest alone)"
    )
    return Manifest({}, {}, [notice], older)


def _foreign(version: _Version, current: tuple[int, str]) -> bool:
    """Whether an entry names another version (one that names none is this one's, and
    checked: a notice, never silence)."""
    named = isinstance(version.schema, int) and isinstance(version.reader, str)
    return named and (version.schema, version.reader) != current


def entry_notice(part: str, raw, why: str) -> str:
    run = raw.get("run") if isinstance(raw, dict) else None
    named = f"{run!r} (part {part!r})" if isinstance(run, str) else f"part {part!r}"
    # text from the manifest (a key msgspec names in ``why``) may hold bytes no document can carry
    return escape_undecodable(
        f"the shared index's entry for {named} cannot be used ({why}); its run is read from its profile"
    )


def nests_within(data: bytes, depth: int) -> bool:
    """Whether JSON text nests arrays and objects no deeper than ``depth``, told without
    parsing it (in C-speed passes over the bytes: 0.2 s for a 15 MB manifest of 10,000
    sessions, against 0.4 s to parse it). Text that is no JSON may pass: the parser says."""
    # escaped backslashes, then escaped quotes, out: every quote left opens or closes a string
    text = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(text.split(b'"')[::2])  # outside strings
    for _ in range(depth):
        if not brackets:
            return True
        inner = _INNERMOST.sub(b"", brackets)  # one level a pass
        if len(inner) == len(brackets):
            return False  # unbalanced
        brackets = inner
    return not brackets


_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_INNERMOST = re.compile(rb"\[\]|\{\}")


def checked_entry(part: str, raw) -> dict:
    """The entry as the index uses it (``raw`` with its facts whole), or IndexInputError."""
    try:
        entry = msgspec.convert(raw, _Entry)
    except msgspec.ValidationError as error:
        raise IndexInputError(str(error)) from None
    if entry.part != part:
        raise IndexInputError(f"it names part {entry.part!r}")
    if entry.error is None and entry.facts is None:
        raise IndexInputError("it holds neither facts nor an error")
    if entry.tables and (entry.batch is None or any(end <= start for start, end in entry.tables.values())):
        raise IndexInputError("its tables are placed in no batch, or in empty ranges")
    for record in entry.files:
        if record.path.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", record.path):
            raise IndexInputError(f"its file {record.path!r} is not below the logdir")
    if entry.facts is not None:
        _check_facts(entry.facts)
    _check_text(entry)
    checked = dict(raw)
    checked["facts"] = None if entry.facts is None else msgspec.to_builtins(entry.facts)
    checked["step_count"] = entry.step_count
    checked["op_names"] = entry.op_names
    checked["sidecar"] = None if entry.sidecar is None else msgspec.to_builtins(entry.sidecar)
    return checked


def _check_facts(facts: ProfileFacts) -> None:
    """The facts' ranges and the workers' records (their types are msgspec's)."""
    wrong = [
        name for name, value in (("steps", facts.steps), ("memory_events", facts.memory_events)) if (value or 0) < 0
    ]
    if facts.batch_size is not None and facts.batch_size < 1:
        wrong.append("batch_size")
    if facts.batch_size_agreement is not None and not 0 <= facts.batch_size_agreement <= 1:
        wrong.append("batch_size_agreement")
    times = [facts.step_time_us, *facts.step_times_us]
    if any(value is not None and value < 0 for value in times):
        wrong.append("step_time_us")
    if any(value < 0 for value in facts.peak_memory_bytes.values()):
        wrong.append("peak_memory_bytes")
    if wrong:
        raise IndexInputError(f"facts out of range: {', '.join(wrong)}")
    for worker in facts.workers:
        unknown = set(worker) - set(WorkerRecord.__struct_fields__)
        try:
            msgspec.convert(worker, WorkerRecord)
        except msgspec.ValidationError as error:
            raise IndexInputError(f"a worker of its facts: {error}") from None
        if unknown:
            raise IndexInputError(f"a worker of its facts holds {', '.join(sorted(map(repr, unknown)))}")


def _check_text(entry: _Entry) -> None:
    """Text the documents show must be UTF-8 (a JSON ``\\udcff`` is none): encoding it
    would fail each answer that shows it. File names may not be: they are the names the
    files have (the listing shows them escaped), as are the workers' trace files."""
    try:
        msgspec.json.encode([entry.run, entry.session, entry.error, entry.facts, entry.op_names, entry.sidecar])
        return
    except UnicodeEncodeError:
        pass
    if entry.facts is None:  # an error entry: no workers to leave out
        raise IndexInputError("its text is not UTF-8")
    try:  # the workers' files left out (rare: only where the whole failed)
        facts = dataclasses.replace(entry.facts, workers=[])
        msgspec.json.encode([entry.run, entry.session, entry.error, facts, entry.op_names, entry.sidecar])
    except UnicodeEncodeError:
        raise IndexInputError("its text is not UTF-8") from None


# -- parts ------------------------------------------------------------------------------------


def part_budget(memory_bytes: int) -> int | None:
    """The most bytes of one part read (None: no bound but the rows'): a Parquet file
    never takes less memory than its bytes."""
    return memory_bytes if memory_bytes > 0 else None


def decode_part(data: bytes, table: str, memory_bytes: int) -> dict:
    """A part's columns as numpy arrays (strings as Python objects, as readers make them),
    after its size, row count and schema are checked from its footer, and then its
    values: no text column or count holds a null, no count is negative. Raises
    IndexInputError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    budget = part_budget(memory_bytes)
    if budget is not None and len(data) > budget:
        raise IndexInputError(f"over {budget / 1e6:,.0f} MB (memory guard)")
    try:
        # Arrow's own reader of the bytes, not a Python file object: a part is a session's
        # table, a few KB, and a view of 1,000 indexed runs decodes 5,000 of them
        part = pq.ParquetFile(pa.BufferReader(data))
        expected = _schema(table)
        if not part.schema_arrow.equals(expected, check_metadata=False):
            raise IndexInputError(f"its columns are not those of {table!r}")
        _check_size(part.metadata, expected, memory_bytes)
        # On Arrow's threads, even a part of a few KB. In the calling thread it was 0.1-0.3
        # ms faster a part, but a server's calling thread is a new one for each request,
        # Arrow's allocator (mimalloc) keeps a heap a thread, and CI's soak of an index
        # rewritten under a server then read +0.40 MB a rewrite (bound 0.4; +0.03-0.07 MB
        # here): not proven the cause, not worth the risk of a server that grows.
        read = part.read()
    except IndexInputError:
        raise
    except Exception as error:  # pyarrow's own errors for a truncated or foreign file
        raise IndexInputError(str(error)) from None
    columns = {}
    for field, column in zip(expected, read.columns):
        kind = str(field.type)
        if kind != "double" and column.null_count:
            raise IndexInputError(f"its column {field.name!r} holds nulls")
        values = column.to_numpy(zero_copy_only=False)
        if kind == "int64" and len(values) and values.min() < 0:
            raise IndexInputError(f"its column {field.name!r} holds negative counts")
        columns[field.name] = values
    return columns


@functools.lru_cache(maxsize=None)
def _schema(table: str):
    return table_schema(table)


def _check_size(metadata, schema, memory_bytes: int) -> None:
    """Refuse a part whose rows would pass the memory guard once decoded, from its footer."""
    rows = metadata.num_rows
    if rows > PART_MAX_ROWS:
        raise IndexInputError(f"{rows:,} rows, more than any profile's")
    decoded = sum(metadata.row_group(group).total_byte_size for group in range(metadata.num_row_groups))
    decoded += rows * STRING_BYTES * sum(1 for field in schema if str(field.type) == "string")
    if memory_bytes > 0 and decoded > memory_bytes:
        raise IndexInputError(f"about {decoded / 1e9:,.1f} GB once decoded, above the memory guard's limit")


def check_steps(tables: dict[str, dict], step_count: int) -> None:
    """The per-step rows point into their session: each ``row`` at one of its ops, each
    ``step`` at one of its ``step_count`` steps (the views index arrays with them: a row
    past the table ended `check` in an IndexError)."""
    steps = tables.get("steps")
    if not steps or not len(steps["row"]):
        return
    ops = len(next(iter(tables["ops"].values()))) if tables.get("ops") else 0
    if steps["row"].max() >= ops:
        raise IndexInputError("its steps table names ops its ops table does not hold")
    if steps["step"].max() >= step_count:
        raise IndexInputError(f"its steps table names steps past its {step_count}")
