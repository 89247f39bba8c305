"""Where the shared index keeps its sessions' tables (index schema 2): in batches, one a
`tb-opcompare index` that read something, each written whole:

    <logdir>/.opcompare/bundles/<batch>.bundle  every session's tables, one after the other
    <logdir>/.opcompare/<table>/<batch>.parquet the table of every session, a row group each

A session's tables in the bundle are each a Parquet file of their own, next to each other:
reading one run is one range read (its entry in the manifest says where), and reading a
whole batch one read. The tables' own files are the dataset DuckDB and pandas read
(``.opcompare/ops/*.parquet``); the tool never reads them. Before (index schema 1), a file
a session and table made listing a bucket cost 4-5 requests a run, and a logdir of 1,000
runs held 5,000 of them.

Appending sessions writes a batch of their own, and nothing else. A batch that loses a
session (a profile changed and was indexed again, or is gone) is written anew with the
sessions it still holds, as are the smallest past ``MAX_BATCHES``: their bytes are copied
(each checked), no profile is read, and the dataset never counts a session twice.
"""

from __future__ import annotations

import dataclasses
import io
import re
import secrets

from tb_opcompare.ingest import fs
from tb_opcompare.schema.index_tables import PROFILE_TABLES, RUNS, table_schema
from tb_opcompare.store.index_input import IndexInputError

BUNDLES = "bundles"
BUNDLE_SUFFIX = ".bundle"
TABLES = (RUNS, *PROFILE_TABLES)  # a session's order in its bundle: its facts' row first
MAX_BATCHES = 16  # past this, the smallest batches are written together anew
BATCH = re.compile(r"[0-9a-f]{24}")


def new_batch() -> str:
    return secrets.token_hex(12)


def bundle_path(root: str, batch: str) -> str:
    return fs.join(root, BUNDLES, batch + BUNDLE_SUFFIX)


def table_path(root: str, table: str, batch: str) -> str:
    return fs.join(root, table, batch + ".parquet")


def batch_files(root: str, batch: str) -> list[str]:
    """Every file of a batch (only names this version writes: a manifest never leads a
    deletion elsewhere)."""
    if not BATCH.fullmatch(batch):
        return []
    return [bundle_path(root, batch), *(table_path(root, table, batch) for table in TABLES)]


def span(entry: dict) -> tuple[int, int]:
    """The bytes of the entry's bundle that hold its tables."""
    ranges = entry["tables"].values()
    return min(start for start, _ in ranges), max(end for _, end in ranges)


def split(entry: dict, data: bytes) -> dict[str, bytes]:
    """The entry's tables, each a Parquet file, from the bytes of its ``span``."""
    base = span(entry)[0]
    return {table: data[start - base : end - base] for table, (start, end) in entry["tables"].items()}


@dataclasses.dataclass
class Batch:
    """A batch being made: the sessions' tables, each checked against its schema."""

    name: str = dataclasses.field(default_factory=new_batch)
    bundle: bytearray = dataclasses.field(default_factory=bytearray)
    tables: dict[str, list] = dataclasses.field(default_factory=dict)  # table -> a pyarrow Table a session

    def add(self, entry: dict, blobs: dict[str, bytes], made: dict | None = None) -> None:
        """Place the session's tables (``blobs``, a Parquet file each) in the batch and say
        where in its entry. ``made``: the same tables as pyarrow Tables, where this tool has
        just made them; else each blob is read and checked, and IndexInputError raised (the
        batch unchanged) for a table that is not one of its schema's (an earlier batch's
        bytes: a bundle is input too). Reading back a session's fresh tables was a third of
        `index`'s time on small sessions."""
        checked = {
            table: made[table] if made is not None and table in made else _checked(table, blobs[table])
            for table in TABLES
            if table in blobs
        }
        spans = {}
        for table, frame in checked.items():
            start = len(self.bundle)
            self.bundle += blobs[table]
            spans[table] = [start, len(self.bundle)]
            self.tables.setdefault(table, []).append(frame)
        entry["batch"], entry["tables"] = self.name, spans

    def files(self, root: str) -> dict[str, bytes]:
        """The batch's files by path: the bundle, and each table's file of the dataset."""
        files = {bundle_path(root, self.name): bytes(self.bundle)}
        for table, frames in self.tables.items():
            files[table_path(root, table, self.name)] = _dataset_file(table, frames)
        return files


def _checked(table: str, data: bytes):
    import pyarrow.parquet as pq

    try:
        frame = pq.read_table(io.BytesIO(data))
    except Exception as error:  # pyarrow's own errors for a truncated or foreign file
        raise IndexInputError(f"its {table} table cannot be read ({error})") from None
    if not frame.schema.equals(table_schema(table), check_metadata=False):
        raise IndexInputError(f"its {table} table's columns are not those of {table!r}")
    return frame


def _dataset_file(table: str, frames: list) -> bytes:
    """One Parquet file of the table, a row group a session."""
    import pyarrow.parquet as pq

    out = io.BytesIO()
    with pq.ParquetWriter(out, table_schema(table), compression="zstd") as writer:
        for frame in frames:
            writer.write_table(frame)
    return out.getvalue()


def to_rewrite(before: dict[str, dict], now: dict[str, dict]) -> set[str]:
    """The batches to write anew: each that held a session ``before`` (the manifest as it
    was, by part) which ``now`` (as it will be) holds no more or holds elsewhere, and the
    smallest past ``MAX_BATCHES``."""
    held_before, held_now = _by_batch(before), _by_batch(now)
    dirty = {batch for batch, parts in held_before.items() if parts != held_now.get(batch, set())}
    kept = {batch: parts for batch, parts in held_now.items() if batch not in dirty}
    if len(kept) >= MAX_BATCHES:
        sizes = {batch: sum(_size(now[part]) for part in parts) for batch, parts in kept.items()}
        dirty |= set(sorted(kept, key=sizes.__getitem__)[: len(kept) - MAX_BATCHES + 2])
    return dirty


def _by_batch(entries: dict[str, dict]) -> dict[str, set[str]]:
    held: dict[str, set[str]] = {}
    for part, entry in entries.items():
        batch = entry.get("batch") if isinstance(entry, dict) else None
        if isinstance(batch, str) and entry.get("tables"):
            held.setdefault(batch, set()).add(part)
    return held


def _size(entry: dict) -> int:
    try:
        start, end = span(entry)
        return end - start
    except (TypeError, ValueError, AttributeError):
        return 0
