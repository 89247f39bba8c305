"""The shared index: each session's parsed tables kept beside the profiles, in the logdir's
``.opcompare/`` folder, so any process on any machine that reads the logdir lists and
compares from them without reading a profile byte. ``tb-opcompare index`` writes it;
every reader uses it when it is there and can be trusted, and never needs it.

Layout (the user's documentation, with every column: docs/index_schema.md):

    <logdir>/.opcompare/manifest.json           which sessions are indexed, from which files
    <logdir>/.opcompare/<table>/<part>.parquet  one part per session and table

One folder at the logdir's root rather than a file beside each profile: one place to grant
(or deny) write access to and to delete, one glob for DuckDB or pandas
(``.opcompare/ops/*.parquet``), and nothing new inside the session folders that
TensorBoard's Profile tab and other tools scan.

Trust. An entry is used only when it was written under this index schema and reader
version, and each of the session's files still has the size and the modification time
(or the store's content tag: S3's ETag, GCS's generation) it had when indexed. A file of
the same size with a new modification time (a logdir copied with ``cp -r`` or ``aws s3
sync``) is compared by the hash of its first and last 64 KiB. Anything else is read again
from the profile. A logdir without an index, or whose index cannot be read, is read as
before; one that cannot be written (a read-only share, a bucket that denies writes) keeps
the parsed tables in the local cache, with a warning.

Several writers: parts are written whole (a temporary name then a rename; one put to an
object store), and the manifest is read again and merged just before it is written, so
two indexers of one logdir lose at most the other's newest entries, which are then read
from the profiles (never a wrong number).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import os
import re
import threading

from tb_opcompare import __version__
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import INDEX_FOLDER, HeadFacts, facts_of_head, relative_to
from tb_opcompare.ingest.workers import Rank
from tb_opcompare.schema.events import ProfileFacts
from tb_opcompare.schema.index_tables import (
    KEY_COLUMNS,
    PROFILE_TABLES,
    RUNS,
    empty_table,
    parquet_bytes,
    session_columns,
)
from tb_opcompare.store.cache import READER_VERSION, profile_columns, profile_from_columns

INDEX_SCHEMA = 1  # bump when a table's columns or the manifest change meaning
MANIFEST = "manifest.json"
_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Found:
    """A session found in the index: its parsed profile, or why it could not be read."""

    profile: object | None  # OpProfile
    unreadable: tuple[str, str] | None = None  # (path, reason)
    passing: bool = False  # unreadable for a reason of this machine or this moment: never indexed


class SharedIndex:
    """The index of one logdir. ``refresh`` reads its manifest (one request); ``lookup``
    returns the sessions whose entries can be trusted; ``write`` adds sessions."""

    def __init__(self, logdir: str):
        self.logdir = logdir
        self.root = fs.join(logdir, INDEX_FOLDER)
        self._entries: dict[str, dict] = {}
        self._files: dict[str, dict] = {}  # a profile file's path -> its record in the manifest
        self._lock = threading.Lock()
        self.warnings: list[str] = []

    # -- reading ------------------------------------------------------------------------------

    def refresh(self) -> None:
        refusal = self._refusal()
        entries, warning = ({}, refusal) if refusal else self._read_manifest()
        entries = {part: entry for part, entry in entries.items() if _well_formed(part, entry)}
        files = {
            fs.join(self.logdir, record["path"]): record
            for entry in entries.values()
            for record in entry["files"]
            if isinstance(record.get("head"), dict)
        }
        with self._lock:
            self._entries, self._files = entries, files
            self.warnings = [warning] if warning else []

    def known_head(self, path: str) -> HeadFacts | None:
        """What discovery would learn from the file's first bytes, where the index read
        them from this very file (``discovery.KnownHeads``): no request."""
        record = self._files.get(path)
        if record is None or not _unchanged(record, path):
            return None
        try:
            rank = record["head"]["rank"]
            return HeadFacts(tuple(map(str, record["head"]["markers"])), Rank(*rank) if rank else None)
        except (KeyError, TypeError, ValueError):
            return None

    @property
    def size(self) -> int:
        return len(self._entries)

    def part_of(self, paths: list[str]) -> str:
        """A session's part name: a hash of its files' paths within the logdir (so a copied
        or remote logdir finds the same part) and of the schema and reader versions (so an
        indexer of another version writes parts of its own, never over the ones the
        manifest others read describes)."""
        relative = "\n".join([str(INDEX_SCHEMA), READER_VERSION, *(self.relative(path) for path in paths)])
        return hashlib.sha256(relative.encode("utf-8")).hexdigest()[:24]

    def _refusal(self) -> str | None:
        """Why the index folder must not be used: on disk, a link (it could lead reads and
        writes anywhere another user's link points), or a folder outside the logdir."""
        if fs.is_remote(self.root) or not os.path.lexists(self.root):
            return None
        if os.path.islink(self.root) or not fs.within(os.path.realpath(self.logdir), os.path.realpath(self.root)):
            return f"the shared index {self.root} is a link; not used (a real folder is)"
        return None

    def lookup(self, requests: list[tuple[str, list[str]]]) -> dict[int, Found]:
        """For each (format, paths) of ``requests`` whose entry can be trusted, by its
        position: the profile, read from the index's parts (all in one batch of reads)."""
        trusted: dict[int, dict] = {}
        for position, (file_format, paths) in enumerate(requests):
            entry = self._trusted(file_format, paths)
            if entry is not None:
                trusted[position] = entry
        wanted = [self._part_path(table, entry["part"]) for entry in trusted.values() for table in entry["tables"]]
        blobs = fs.read_many(wanted) if wanted else {}
        found: dict[int, Found] = {}
        for position, entry in trusted.items():
            if entry.get("error"):
                found[position] = Found(None, (fs.join(self.logdir, entry["error"]["path"]), entry["error"]["reason"]))
                continue
            try:
                tables = {
                    table: _decode(blobs[self._part_path(table, entry["part"])], self._part_path(table, entry["part"]))
                    for table in entry["tables"]
                }
                found[position] = Found(_profile_from_tables(entry, tables))
            except (OSError, ValueError, KeyError, TypeError) as error:
                _logger.warning(
                    "op_compare: the shared index's part %s cannot be used (%s); reading the profile",
                    entry["part"],
                    error,
                )
        return found

    def _trusted(self, file_format: str, paths: list[str]) -> dict | None:
        """The session's entry, where one is there and can be trusted."""
        entry = self._entries.get(self.part_of(paths))
        return (
            entry
            if entry is not None and entry.get("format") == file_format and self._still_true(entry, paths)
            else None
        )

    def _still_true(self, entry: dict, paths: list[str]) -> bool:
        if entry.get("schema") != INDEX_SCHEMA or entry.get("reader") != READER_VERSION:
            return False
        if len(entry["files"]) != len(paths):
            return False
        for recorded, path in zip(entry["files"], paths):
            try:
                if _unchanged(recorded, path):
                    continue
                if fs.signature(path)[0] != recorded["size"] or _ends_hash(path) != recorded.get("ends_sha256"):
                    return False  # not the file indexed, nor a copy of it (same size, same ends)
            except OSError:
                return False
        return True

    # -- writing ------------------------------------------------------------------------------

    def write_part(
        self, run: str, session: str, file_format: str, paths: list[str], found: Found, before: list[dict]
    ) -> dict | None:
        """Write one session's tables (or its reason for being unreadable) and return its
        manifest entry; ``write_manifest`` publishes it. ``before``: each file's
        fingerprint taken before it was read; a file that changed since (a profiler still
        writing it) gets no entry (None), as the tables may be the old bytes'. Raises
        OSError where the logdir cannot be written."""
        refusal = self._refusal()
        if refusal:
            raise OSError(refusal)
        now = [fs.fingerprint(path) for path in paths]
        if now != before:
            return None
        part = self.part_of(paths)
        files = []
        for path, fingerprint in zip(paths, now):
            ends = fs.read_ends(path)  # its head is the first bytes discovery looks at (ENDS_BYTES = SNIFF_BYTES)
            head = facts_of_head(ends)
            files.append(
                {
                    "path": self.relative(path),
                    **fingerprint,
                    "ends_sha256": hashlib.sha256(ends).hexdigest(),
                    "head": {
                        "markers": list(head.markers),
                        "rank": dataclasses.astuple(head.rank) if head.rank else None,
                    },
                }
            )
        entry = {
            "part": part,
            "run": run,
            "session": session,
            "format": file_format,
            "files": files,
            "schema": INDEX_SCHEMA,
            "reader": READER_VERSION,
            "tool": __version__,
            "tables": [],
        }
        if found.unreadable is not None:
            path, reason = found.unreadable
            entry["error"] = {"path": self.relative(path), "reason": reason}
            return entry
        stored = profile_columns(found.profile)
        # the facts in the manifest too: a reader then fetches only the tables with rows
        entry["facts"], entry["step_count"] = stored["facts"], stored["step_count"]
        for table, data in _tables_of(stored, run, session, [file["path"] for file in files]).items():
            fs.write_bytes(self._part_path(table, part), data)
            if table != RUNS:
                entry["tables"].append(table)
        return entry

    def write_manifest(self, new_entries: list[dict]) -> None:
        """Publish entries: the manifest is read again and merged first (another indexer
        may have written since), then written whole. Raises OSError."""
        refusal = self._refusal()
        if refusal:
            raise OSError(refusal)
        current, _ = self._read_manifest()
        current.update({entry["part"]: entry for entry in new_entries})
        document = {"schema": INDEX_SCHEMA, "tool": __version__, "sessions": current}
        fs.write_bytes(fs.join(self.root, MANIFEST), json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))
        with self._lock:
            self._entries = current

    def indexed(self, file_format: str, paths: list[str]) -> bool:
        return self._trusted(file_format, paths) is not None

    # -- paths --------------------------------------------------------------------------------

    def _part_path(self, table: str, part: str) -> str:
        return fs.join(self.root, table, part + ".parquet")

    def relative(self, path: str) -> str:
        """``path`` below the logdir, with forward slashes (as discovery names runs)."""
        return relative_to(self.logdir, path)

    def _read_manifest(self) -> tuple[dict[str, dict], str | None]:
        path = fs.join(self.root, MANIFEST)
        try:
            document = json.loads(fs.read_bytes(path))
        except FileNotFoundError:
            return {}, None
        except (OSError, ValueError) as error:
            said = error.strerror if isinstance(error, OSError) and error.strerror else error
            return {}, f"the shared index {path} cannot be read ({said}); profiles are read instead"
        if not isinstance(document, dict) or document.get("schema") != INDEX_SCHEMA:
            return {}, None  # another schema's index: rewritten by the next `index`
        sessions = document.get("sessions")
        return (sessions if isinstance(sessions, dict) else {}), None


_PART = re.compile(r"[0-9a-f]{24}")


def _well_formed(part: str, entry) -> bool:
    """An entry whose fields have the types this version writes, naming only its own
    tables: a manifest edited by hand or by another tool never leads a read elsewhere."""
    try:
        return (
            _PART.fullmatch(part) is not None
            and entry["part"] == part
            and set(entry["tables"]) <= set(PROFILE_TABLES)
            and all(isinstance(record["path"], str) and isinstance(record["size"], int) for record in entry["files"])
            and (entry.get("error") is not None or isinstance(entry.get("facts"), dict))
        )
    except (KeyError, TypeError, AttributeError):
        return False


def _unchanged(recorded: dict, path: str) -> bool:
    """The file is the one recorded by its listing alone: same size, and the same content
    tag where the store gives one, else the same modification time."""
    try:
        now = fs.fingerprint(path)
    except OSError:
        return False
    if now["size"] != recorded.get("size"):
        return False
    return now["etag"] == recorded.get("etag") if now["etag"] else now["mtime"] == recorded.get("mtime")


def _ends_hash(path: str) -> str:
    return hashlib.sha256(fs.read_ends(path)).hexdigest()


# -- the tables as Parquet (their schema: schema.index_tables) ---------------------------------


def _tables_of(stored: dict, run: str, session: str, files: list[str]) -> dict[str, bytes]:
    """A profile's Parquet tables (from ``profile_columns``): ``runs`` always, the others
    where they have rows."""
    columns = session_columns(stored, run, session, files)
    return {
        table: parquet_bytes(table, table_columns)
        for table, table_columns in columns.items()
        if table == RUNS or table_columns["run"]
    }


def _decode(data, path: str) -> dict:
    """A part's columns as numpy arrays (strings as Python objects, as readers make them)."""
    import pyarrow.parquet as pq

    if isinstance(data, Exception):
        raise data
    try:
        table = pq.read_table(io.BytesIO(data))
        return {name: column.to_numpy(zero_copy_only=False) for name, column in zip(table.column_names, table.columns)}
    except Exception as error:  # pyarrow's own errors for a truncated or foreign file
        raise ValueError(f"{path}: {error}") from None


def _profile_from_tables(entry: dict, tables: dict[str, dict]):
    stored = {
        "facts": {field.name: entry["facts"][field.name] for field in dataclasses.fields(ProfileFacts)},
        "step_count": entry["step_count"],
    }
    for table, (attribute, _) in PROFILE_TABLES.items():
        columns = tables.get(table)
        stored[attribute] = (
            {name: values for name, values in columns.items() if name not in KEY_COLUMNS}
            if columns
            else {column: [] for column in empty_table(table).columns}
        )
    return profile_from_columns(stored)
