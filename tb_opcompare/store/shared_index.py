"""The shared index: each session's parsed tables kept beside the profiles, in the logdir's
``.opcompare/`` folder, so any process on any machine that reads the logdir lists and
compares from them without reading a profile byte. ``tb-opcompare index`` writes it;
every reader uses it when it is there and can be trusted, and never needs it.

Layout (the user's documentation, with every column: docs/index_schema.md):

    <logdir>/.opcompare/manifest.json             which sessions are indexed, from which
                                                  files, and all a listing shows of each
    <logdir>/.opcompare/bundles/<batch>.bundle    their tables, in batches (``index_batches``)
    <logdir>/.opcompare/<table>/<batch>.parquet   the same, the dataset DuckDB and pandas read

A listing reads the manifest alone (a bucket: one request, where each run's parts and
sidecar cost 4-5 before); reading a run's tables is one range read of its batch's bundle.

One folder at the logdir's root rather than a file beside each profile: one place to grant
(or deny) write access to and to delete, one glob for DuckDB or pandas
(``.opcompare/ops/*.parquet``), and nothing new inside the session folders that
TensorBoard's Profile tab and other tools scan.

Trust. An entry is used only when it was written under this index schema and reader
version, and each of the session's files still has the size and the modification time
(or the store's content tag: S3's ETag, GCS's generation) it had when indexed. A file of
the same size with a new modification time (a logdir copied with ``cp -r`` or ``aws s3
sync``), or one rewritten in place with as many bytes, is compared by a hash of its
whole content (``fs.content_digest``). Anything else is read again
from the profile. A logdir without an index, or whose index cannot be read, is read as
before; one that cannot be written (a read-only share, a bucket that denies writes) keeps
the parsed tables in the local cache, with a warning.

Several writers: each file is written whole (a temporary name then a rename; one put to
an object store), a batch before the manifest that names it, and the manifest is read again and merged just before it is written, so
two indexers of one logdir lose at most the other's newest entries, which are then read
from the profiles (never a wrong number).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from tb_opcompare import __version__
from tb_opcompare.errors import escape_undecodable
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import INDEX_FOLDER, HeadFacts, RunSource, facts_of_head, relative_to
from tb_opcompare.ingest.sidecar import SIDECAR, remember_sidecar
from tb_opcompare.ingest.workers import Rank
from tb_opcompare.schema.events import UNSTORED_FACTS, ProfileFacts
from tb_opcompare.schema.index_tables import (
    KEY_COLUMNS,
    PROFILE_TABLES,
    RUNS,
    arrow_bytes,
    arrow_table,
    empty_table,
    session_columns,
)
from tb_opcompare.store import index_batches
from tb_opcompare.store.cache import READER_VERSION, ProfileSummary, profile_columns, profile_from_columns
from tb_opcompare.store.index_input import (
    SIDECAR_KEPT_BYTES,
    IndexInputError,
    Manifest,
    check_steps,
    decode_part,
    entry_notice,
    manifest_budget,
    parse_manifest,
    part_budget,
)

# bump when a table's columns or the manifest change meaning; 2: each entry carries what a
# listing shows (its ops' names, its run's sidecar), so a listing reads the manifest alone
INDEX_SCHEMA = 2
MANIFEST = "manifest.json"
BLOBS = "blobs"  # a new entry's tables (Parquet bytes by table), until ``write_manifest`` places them
# ... and the same tables as this tool made them (pyarrow Tables), which ``write_manifest``
# need not read back from the bytes: only tables read from a batch's files are input
FRAMES = "frames"


if TYPE_CHECKING:  # the tables come with the readers: a listing from the manifest does without them
    from tb_opcompare.schema.optable import OpProfile

_Kept = TypeVar("_Kept", "OpProfile", ProfileSummary)  # a session's tables, or only what a listing shows


@dataclasses.dataclass(frozen=True)
class Found(Generic[_Kept]):
    """A session found in the index: its parsed profile (or its summary), or why it could
    not be read."""

    profile: _Kept | None
    unreadable: tuple[str, str] | None = None  # (path, reason)
    passing: bool = False  # unreadable for a reason of this machine or this moment: never indexed


class SharedIndex:
    """The index of one logdir. ``refresh`` reads its manifest (one request); ``lookup``
    returns the sessions whose entries can be trusted; ``write`` adds sessions."""

    def __init__(self, logdir: str, memory_bytes: int = 0):
        self.logdir = logdir
        self.root = fs.join(logdir, INDEX_FOLDER)
        self.memory_bytes = memory_bytes  # the memory guard's limit (0: none): the index is read within it too
        self._entries: dict[str, dict] = {}
        self._files: dict[str, dict] = {}  # a profile file's path -> its record in the manifest
        self._not_traces: dict[str, dict] = {}  # a JSON file found to be no profile -> its version then
        # parts found bad (part -> (its entry, the notice)): read from the profile, and said,
        # for as long as the manifest holds that entry
        self._bad: dict[str, tuple[dict, str]] = {}
        self._lock = threading.Lock()
        self._notices: list[str] = []
        self._last_parsed: tuple[bytes, Manifest | None] | None = None  # the manifest's bytes, parsed
        # (path, size, mtime, etag, recorded digest) -> whether the content is the recorded one: a
        # file touched or copied since it was indexed is hashed once a process, not at every listing
        self._same_content: dict[tuple, bool] = {}

    @property
    def warnings(self) -> list[str]:
        """What the listing says of the index: why it is not used, the entries and parts
        left out, each named."""
        with self._lock:
            return self._notices + [notice for _, notice in self._bad.values()]

    # -- reading ------------------------------------------------------------------------------

    def refresh(self) -> None:
        refusal = self._refusal()
        manifest, warning = (Manifest({}, {}, []), refusal) if refusal else self._read_manifest()
        files = {
            fs.join(self.logdir, record["path"]): record
            for entry in manifest.entries.values()
            for record in entry["files"]
            if isinstance(record.get("head"), dict)
        }
        not_traces = {fs.join(self.logdir, path): version for path, version in manifest.not_traces.items()}
        with self._lock:
            self._entries, self._files, self._not_traces = manifest.entries, files, not_traces
            self._notices = ([escape_undecodable(warning)] if warning else []) + manifest.notices
            self._bad = {part: bad for part, bad in self._bad.items() if manifest.entries.get(part) == bad[0]}

    def known_head(self, path: str) -> HeadFacts | None:
        """What discovery would learn from the file's first bytes, where the index read
        them from this very file (``discovery.KnownHeads``): no request."""
        record = self._files.get(path)
        if record is None:
            not_trace = self._not_traces.get(path)
            return HeadFacts((), None) if not_trace is not None and _unchanged(not_trace, path) else None
        if not _unchanged(record, path):
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
        manifest others read describes). A name that is not UTF-8 is hashed as its bytes."""
        relative = "\n".join([str(INDEX_SCHEMA), READER_VERSION, *(self.relative(path) for path in paths)])
        return hashlib.sha256(relative.encode("utf-8", "surrogateescape")).hexdigest()[:24]

    def _refusal(self) -> str | None:
        """Why the index folder must not be used: on disk, a link (it could lead reads and
        writes anywhere another user's link points), or a folder outside the logdir."""
        if fs.is_remote(self.root) or not os.path.lexists(self.root):
            return None
        if os.path.islink(self.root) or not fs.within(os.path.realpath(self.logdir), os.path.realpath(self.root)):
            return f"the shared index {self.root} is a link; not used (a real folder is)"
        return None

    def _confined(self):
        """Reads and writes of the index's files within its real folder: a part or a table
        folder that links elsewhere (another logdir's index) is never followed, by the rule
        every read of the logdir keeps (``fs.confined``)."""
        if fs.is_remote(self.root):
            return contextlib.nullcontext()
        return fs.confined((os.path.realpath(self.root),))

    def lookup(self, requests: list[tuple[str, list[str]]]) -> dict[int, Found[OpProfile]]:
        """For each (format, paths) of ``requests`` whose entry can be trusted, by its
        position: the profile, read from the index's parts (all in one batch of reads)."""
        trusted: dict[int, dict] = {}
        for position, (file_format, paths) in enumerate(requests):
            entry = self._trusted(file_format, paths)
            if entry is not None:
                trusted[position] = entry
        read = self._read_tables([entry for entry in trusted.values() if not entry.get("error")])
        found: dict[int, Found[OpProfile]] = {}
        for position, entry in trusted.items():
            if entry.get("error"):
                found[position] = Found(None, (fs.join(self.logdir, entry["error"]["path"]), entry["error"]["reason"]))
                continue
            try:
                found[position] = Found(self._profile_of(entry, read[entry["part"]]))
            except IndexInputError as error:  # that run is read from its profile
                with self._lock:
                    self._bad[entry["part"]] = (entry, entry_notice(entry["part"], entry, str(error)))
        return found

    def _read_tables(self, entries: list[dict]) -> dict[str, dict[str, bytes] | IndexInputError]:
        """Each entry's tables (a Parquet file each) by its part, read from its batch's bundle
        in one range read an entry, all sent at once; or why they cannot be."""
        read: dict[str, dict[str, bytes] | IndexInputError] = {}
        wanted = []
        for entry in entries:
            start, end = index_batches.span(entry) if entry["tables"] else (0, 0)
            budget = part_budget(self.memory_bytes)
            if budget is not None and end - start > budget * len(entry["tables"]):
                read[entry["part"]] = IndexInputError(f"over {budget / 1e6:,.0f} MB a table (memory guard)")
            elif entry["tables"]:
                wanted.append((entry, (index_batches.bundle_path(self.root, entry["batch"]), start, end)))
            else:
                read[entry["part"]] = {}
        with self._confined():
            fetched = fs.read_ranges([where for _, where in wanted]) if wanted else []
        for (entry, (path, start, end)), data in zip(wanted, fetched):
            if isinstance(data, OSError):
                read[entry["part"]] = IndexInputError(f"{path}: {data.strerror or data}")
            elif len(data) != end - start:
                read[entry["part"]] = IndexInputError(f"{path}: shorter than its entry says")
            else:
                read[entry["part"]] = index_batches.split(entry, data)
        return read

    def _profile_of(self, entry: dict, blobs: dict[str, bytes] | IndexInputError) -> OpProfile:
        """The entry's profile from its tables' bytes, each checked. Raises IndexInputError."""
        if isinstance(blobs, IndexInputError):
            raise blobs
        tables = {}
        for table, data in blobs.items():
            if table == RUNS:
                continue  # its facts are the manifest's
            try:
                tables[table] = decode_part(data, table, self.memory_bytes)
            except IndexInputError as error:
                raise IndexInputError(f"its {table} table: {error}") from None
        check_steps(tables, entry["step_count"])
        try:
            return _profile_from_tables(entry, tables)
        except (ValueError, KeyError, TypeError) as error:  # whatever the checks missed costs this run only
            raise IndexInputError(f"its tables cannot be made: {error}") from None

    def summary(self, file_format: str, paths: list[str]) -> Found[ProfileSummary] | None:
        """What a listing shows of the session (its facts and ops' names, a ``ProfileSummary``),
        or why it is unreadable, from the manifest alone (no request), where its entry can be
        trusted and holds them; None otherwise."""
        entry = self._trusted(file_format, paths)
        if entry is None:
            return None
        if entry.get("error"):
            return Found(None, (fs.join(self.logdir, entry["error"]["path"]), entry["error"]["reason"]))
        if entry.get("op_names") is None:
            return None
        try:
            facts = ProfileFacts(
                **{
                    field.name: entry["facts"][field.name]
                    for field in dataclasses.fields(ProfileFacts)
                    if field.name not in UNSTORED_FACTS
                }
            )
        except (KeyError, TypeError):
            return None
        facts.read_from = written_by(entry)
        return Found(ProfileSummary(facts, frozenset(entry["op_names"])))

    def seed_sidecars(self, sources: list[RunSource]) -> None:
        """Let the runs' sidecars be read from the index's copies where the listing shows each
        unchanged since (size, time and tag): in a bucket, each sidecar read is a request a
        run (on disk it is a cheap read, under the rule of links: left to it)."""
        if not fs.is_remote(self.logdir) or not self._entries:
            return
        kept = {entry["sidecar"]["path"]: entry["sidecar"] for entry in self._entries.values() if entry.get("sidecar")}
        for source in sources:
            if not source.sidecar_listed:
                continue
            path = fs.join(source.run_dir, SIDECAR)
            copy = kept.get(self.relative(path))
            if copy is None:
                continue
            try:
                now = fs.fingerprint(path)
            except OSError:
                continue
            if (now["size"], now["mtime"], now["etag"]) == (copy["size"], copy["mtime"], copy.get("etag")):
                remember_sidecar(path, now, copy["text"].encode("utf-8"))

    def _trusted(self, file_format: str, paths: list[str]) -> dict | None:
        """The session's entry, where one is there and can be trusted."""
        part = self.part_of(paths)
        entry = self._entries.get(part)
        return (
            entry
            if entry is not None
            and part not in self._bad
            and entry.get("format") == file_format
            and self._still_true(entry, paths)
            else None
        )

    def _still_true(self, entry: dict, paths: list[str]) -> bool:
        if entry.get("schema") != INDEX_SCHEMA or entry.get("reader") != READER_VERSION:
            return False
        if len(entry["files"]) != len(paths):
            return False
        for recorded, path in zip(entry["files"], paths):
            try:
                if not (_unchanged(recorded, path) or self._same_bytes(recorded, path)):
                    return False
            except OSError:
                return False
        return True

    def _same_bytes(self, recorded: dict, path: str) -> bool:
        """A new time, the same size: a copy (cp -r, aws s3 sync) or a rewrite in place of as
        many bytes, told apart by the whole content (the first and last 64 KiB alone served 63
        of 67 stale rows of a trace edited in its middle); each version of a file once."""
        digest = recorded.get("content_blake2b")
        now = fs.fingerprint(path)
        if now["size"] != recorded["size"] or not digest:
            return False
        key = (path, now["size"], now["mtime"], now["etag"], digest)
        same = self._same_content.get(key)  # one lookup: another request's thread may clear the dict
        if same is None:
            same = fs.content_digest(path) == digest
            if len(self._same_content) >= _MOST_REMEMBERED:  # a logdir touched for months: start afresh
                self._same_content.clear()
            self._same_content[key] = same
        return same

    # -- writing ------------------------------------------------------------------------------

    def make_entry(
        self,
        run: str,
        session: str,
        file_format: str,
        paths: list[str],
        found: Found[OpProfile],
        before: list[dict],
        run_dir: str | None = None,
    ) -> dict | None:
        """One session's manifest entry, with its tables (or its reason for being
        unreadable), for ``write_manifest`` to place in a batch and publish: a worker of a
        pool or a cluster makes it, the indexer writes the batch whole. ``run_dir``: the run's folder, whose
        sidecar the entry keeps a copy of (where it has one). ``before``: each file's
        fingerprint taken before it was read; a file that changed since (a profiler still
        writing it) gets no entry (None), as the tables may be the old bytes'. Raises
        OSError where the logdir's index cannot be written."""
        refusal = self._refusal()
        if refusal:
            raise OSError(refusal)
        now = [fs.fingerprint(path) for path in paths]
        if now != before:
            return None
        part = self.part_of(paths)
        files = [self._file_record(path, fingerprint) for path, fingerprint in zip(paths, now)]
        entry = {
            "part": part,
            "run": run,
            "session": session,
            "format": file_format,
            "files": files,
            "schema": INDEX_SCHEMA,
            "reader": READER_VERSION,
            "tool": __version__,
            "tables": {},
        }
        if found.unreadable is not None:
            path, reason = found.unreadable
            entry["error"] = {"path": self.relative(path), "reason": reason}
            return entry
        if found.profile is None:
            raise ValueError("a session found with neither a profile nor an error")
        stored = profile_columns(found.profile)
        # the facts in the manifest too, with the ops' names and the sidecar: a listing then
        # reads the manifest alone, and a reader fetches only the tables with rows
        entry["facts"] = {name: value for name, value in stored["facts"].items() if name not in UNSTORED_FACTS}
        entry["step_count"] = stored["step_count"]
        entry["op_names"] = sorted(set(stored["ops"]["op_name"]))
        entry["sidecar"] = self._sidecar_copy(run_dir) if run_dir else None
        shown = [escape_undecodable(file["path"]) for file in files]  # Parquet text is UTF-8
        frames = _tables_of(stored, run, session, shown)
        entry[BLOBS] = {table: arrow_bytes(frame) for table, frame in frames.items()}  # placed by ``write_manifest``
        entry[FRAMES] = frames
        return entry

    def _file_record(self, path: str, fingerprint: dict) -> dict:
        """A profile file as its entry records it: where, which version, its first bytes' facts."""
        ends = fs.read_ends(path)  # its head is the first bytes discovery looks at (ENDS_BYTES = SNIFF_BYTES)
        head = facts_of_head(ends)
        return {
            "path": self.relative(path),
            **fingerprint,
            "ends_sha256": hashlib.sha256(ends).hexdigest(),  # what earlier versions compare
            "content_blake2b": fs.content_digest(path),
            "head": {"markers": list(head.markers), "rank": dataclasses.astuple(head.rank) if head.rank else None},
        }

    def _sidecar_copy(self, run_dir: str) -> dict | None:
        """The run's sidecar as the index keeps it (with its version, so a sidecar corrected
        since is read again), where it is small UTF-8 text; None where there is none."""
        path = fs.join(run_dir, SIDECAR)
        try:
            fingerprint = fs.fingerprint(path)
            if fingerprint["size"] > SIDECAR_KEPT_BYTES:
                return None
            data = fs.read_head(path, SIDECAR_KEPT_BYTES + 1)
            if fs.fingerprint(path) != fingerprint or len(data) != fingerprint["size"]:
                return None  # rewritten while it was read
            return {"path": self.relative(path), **fingerprint, "text": data.decode("utf-8")}
        except (OSError, UnicodeDecodeError):
            return None

    def write_manifest(
        self, new_entries: list[dict], listed: set[str] | None = None, not_traces: list[str] | None = None
    ) -> int:
        """Publish entries (``make_entry``'s): the manifest is read again and merged first
        (another indexer may have written since); the new sessions' tables are written in a
        batch of their own (``store.index_batches``), with the sessions of the batches to
        write anew; then the manifest, whole, other versions' entries kept. With ``listed``
        (the files the listing found), the entries of files that are gone are pruned: runs
        deleted and recorded anew left 16 entries and 48 parts for 4 runs. ``not_traces``:
        the JSON files the listing found to be no profile, which a listing then does not
        look into while they are unchanged (None: those the manifest names kept). Returns
        the entries pruned. Raises OSError."""
        refusal = self._refusal()
        if refusal:
            if new_entries:
                raise OSError(refusal)
            return 0
        manifest, _ = self._read_manifest()
        before = {**manifest.foreign, **manifest.entries}
        current = {**before, **{entry["part"]: entry for entry in new_entries}}
        gone = {part: current.pop(part) for part in self._gone(current, listed)} if listed is not None else {}
        kept = manifest.not_traces if not_traces is None else self._versions(not_traces)
        if not new_entries and not gone and not manifest.older and kept == manifest.not_traces:
            return 0
        rewritten = index_batches.to_rewrite(before, current)
        with self._confined():
            self._write_batch(current, rewritten)
            document = {"schema": INDEX_SCHEMA, "tool": __version__, "sessions": current, "not_traces": kept}
            fs.write_bytes(fs.join(self.root, MANIFEST), json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))
            for path in [file for batch in rewritten for file in index_batches.batch_files(self.root, batch)]:
                with contextlib.suppress(OSError):
                    fs.remove(path)
            for part, entry in manifest.older.items():  # an older layout's parts
                self._delete_parts(part, entry)
        with self._lock:
            self._entries = {part: entry for part, entry in current.items() if part not in manifest.foreign}
        return len(gone)

    def _write_batch(self, current: dict[str, dict], rewritten: set[str]) -> None:
        """Write one batch of the new entries' tables and those of the entries of the batches
        ``rewritten`` (their bytes read at once, each checked: one that cannot be is dropped
        from ``current``, and its session read again by the next `index`)."""
        moved = {part: entry for part, entry in current.items() if entry.get("batch") in rewritten}
        blobs = self._moved_tables(moved)
        batch = index_batches.Batch()
        for part, entry in list(current.items()):
            tables = entry.pop(BLOBS, None) if BLOBS in entry else blobs.get(part)
            made = entry.pop(FRAMES, None)
            if tables is None:
                if part in moved:
                    del current[part]
                continue
            entry = current[part] = dict(entry)
            try:
                batch.add(entry, tables, made)
            except IndexInputError:
                del current[part]
        if batch.bundle:
            for path, data in batch.files(self.root).items():
                fs.write_bytes(path, data)

    def _moved_tables(self, moved: dict[str, dict]) -> dict[str, dict[str, bytes]]:
        """The tables of entries of batches to write anew, read from their bundles at once;
        an entry whose tables cannot be read is left out."""
        wanted = []
        for part, entry in moved.items():
            try:
                start, end = index_batches.span(entry)
                wanted.append((part, (index_batches.bundle_path(self.root, entry["batch"]), start, end)))
            except (TypeError, ValueError, AttributeError, KeyError):
                continue
        fetched = fs.read_ranges([where for _, where in wanted]) if wanted else []
        tables = {}
        for (part, (_, start, end)), data in zip(wanted, fetched):
            if isinstance(data, bytes) and len(data) == end - start:
                tables[part] = index_batches.split(moved[part], data)
        return tables

    def _versions(self, paths: list[str]) -> dict[str, dict]:
        """Each file's version (size, time, tag: from the listing, no request), by its path
        below the logdir; a file that cannot be asked about is left out."""
        versions = {}
        for path in paths:
            try:
                versions[self.relative(path)] = fs.fingerprint(path)
            except OSError:
                continue
        return versions

    def _gone(self, entries: dict[str, dict], listed: set[str]) -> list[str]:
        """The entries one of whose files is gone: not among those listed, and not there
        when asked (a file listed is there: no request for it)."""
        gone = []
        for part, entry in entries.items():
            records = files if isinstance(files := entry.get("files"), list) else []
            paths = [
                record["path"] for record in records if isinstance(record, dict) and isinstance(record.get("path"), str)
            ]
            if any(
                fs.join(self.logdir, path) not in listed and fs.is_gone(fs.join(self.logdir, path)) for path in paths
            ):
                gone.append(part)
        return gone

    def _delete_parts(self, part: str, entry: dict) -> None:
        """An older layout's entry's parts, a file a table (only names it wrote: an entry
        never leads a deletion elsewhere); one that cannot be deleted is left."""
        tables = listed if isinstance(listed := entry.get("tables"), list) else []
        if not _PART.fullmatch(part):
            return
        for table in {RUNS, *(table for table in tables if table in PROFILE_TABLES)}:
            with contextlib.suppress(OSError):
                fs.remove(self._part_path(table, part))

    def indexed(self, file_format: str, paths: list[str]) -> bool:
        return self._trusted(file_format, paths) is not None

    # -- paths --------------------------------------------------------------------------------

    def _part_path(self, table: str, part: str) -> str:
        return fs.join(self.root, table, part + ".parquet")

    def relative(self, path: str) -> str:
        """``path`` below the logdir, with forward slashes (as discovery names runs)."""
        return relative_to(self.logdir, path)

    def _read_manifest(self) -> tuple[Manifest, str | None]:
        """The manifest, read no further than the memory guard lets it be parsed, and
        checked (``index_input``); a warning where it cannot be used at all."""
        path = fs.join(self.root, MANIFEST)
        most = manifest_budget(self.memory_bytes)
        empty = Manifest({}, {}, [])
        try:
            with self._confined():
                data = fs.read_head(path, most + 1)
            manifest = self._parsed(data, most)
        except FileNotFoundError:
            return empty, None
        except (OSError, IndexInputError) as error:
            said = error.strerror if isinstance(error, OSError) and error.strerror else error
            return empty, f"the shared index {path} cannot be read ({said}); profiles are read instead"
        return manifest or empty, None  # None: another schema's index, rewritten by the next `index`

    def _parsed(self, data: bytes, most: int) -> Manifest | None:
        """``parse_manifest``, or the last one where the bytes are the same: TensorBoard
        reads the manifest at every listing, and checking each entry of one of 10,000
        sessions took 0.3-0.5 s of the 0.8 s (the bytes compared: a few ms)."""
        last = self._last_parsed
        if last is not None and last[0] == data:
            return last[1]
        manifest = parse_manifest(data, most, (INDEX_SCHEMA, READER_VERSION))
        self._last_parsed = (data, manifest)
        return manifest


_PART = re.compile(r"[0-9a-f]{24}")


_MOST_REMEMBERED = 100_000  # file versions whose content was checked: some MB at most


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


# -- the tables as Parquet (their schema: schema.index_tables) ---------------------------------


def _tables_of(stored: dict, run: str, session: str, files: list[str]) -> dict:
    """A profile's tables (from ``profile_columns``) as pyarrow Tables: ``runs`` always, the
    others where they have rows."""
    columns = session_columns(stored, run, session, files)
    return {
        table: arrow_table(table, table_columns)
        for table, table_columns in columns.items()
        if table == RUNS or table_columns["run"]
    }


def written_by(entry: dict) -> str:
    """Where a run's numbers came from, as the runs document says it: this index, and who
    wrote the entry (its tool's and reader's versions, as the manifest records them)."""
    return f"the shared index ({INDEX_FOLDER}/), written by tb-opcompare {entry.get('tool')} (reader {entry.get('reader')})"


def _profile_from_tables(entry: dict, tables: dict[str, dict]):
    stored = {
        "facts": {
            **{
                field.name: entry["facts"][field.name]
                for field in dataclasses.fields(ProfileFacts)
                if field.name not in UNSTORED_FACTS
            },
            "read_from": written_by(entry),
        },
        "step_count": entry["step_count"],
    }
    for table, (stored_name, _) in PROFILE_TABLES.items():
        columns = tables.get(table)
        stored[stored_name] = (
            {name: values for name, values in columns.items() if name not in KEY_COLUMNS}
            if columns
            else {column: [] for column in empty_table(table).names}
        )
    return profile_from_columns(stored)
