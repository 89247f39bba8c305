"""Parsed profiles, kept so a trace is read once: in memory (bounded, least recently used
out first) and on disk (so a second TensorBoard start reads no trace at all).

The key of a profile is its format and, for every file of the session, the path, size
and modification time, plus ``READER_VERSION``: a file that changes is read again, and a
reader change invalidates every stored table. Concurrent requests for the same key wait
for one parse. A profile that cannot be read is remembered too (its path and reason),
so a broken run costs one attempt, not one per listing.

On disk each profile is one msgpack file of plain columns (``ops`` as column -> list,
``facts`` as a dict), written atomically. Columnar and dependency-free: loading a
5,000-op table takes milliseconds, without pulling pyarrow into TensorBoard. The folder
is bounded (``disk_bytes``): past it, the entries used longest ago are deleted, as a
compiler cache prunes itself; an entry's use is its file's modification time, touched
when it is loaded (access times are often not kept).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from tb_opcompare.errors import NotReadableNow, OverLimit, ProfileError
from tb_opcompare.schema.events import (
    ProfileFacts,
)
from tb_opcompare.store.settings import cache_max_bytes

if TYPE_CHECKING:  # the tables come with the readers: a cold command lists before it loads them
    from tb_opcompare.schema.optable import OpProfile

READER_VERSION = "50"  # bump when any reader's output changes
DEFAULT_MEMORY_BYTES = 512 * 1024 * 1024
# Pruning lists the whole folder: a process does it on its first write, then each time it
# has written this share of the bound, and takes the folder down to the rest of it (so a
# few new entries do not prune again at once)
_PRUNE_EVERY_SHARE, _PRUNE_TO_SHARE = 0.1, 0.8
_STALE_SCRATCH_SECONDS = 3600  # a scratch file this old is a write that died
_WRITTEN_SINCE_PRUNE: dict[str, int] = {}  # cache folder -> bytes this process wrote there since it pruned it
_PRUNE_LOCK = threading.Lock()
# An entry loaded is marked used (its mtime) only where its mark is older than this: a
# listing of 1,000 cached runs, or a shared cache on a network file system, then writes no
# metadata on every load, and pruning still tells an entry of this hour from last week's
_TOUCH_AFTER_SECONDS = 600
# What pruning may delete: the entries and scratch files this cache writes, in the folders
# it makes (the folder may be shared with other programs: $TB_OPCOMPARE_CACHE_DIR=~/.cache)
_FOLDER = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.msgpack")
_SCRATCH_PREFIX, _SCRATCH_SUFFIX = "opcompare-", ".tmp"
_OLD_SCRATCH = re.compile(r"tmp[a-z0-9_]{8}\.tmp")  # tempfile's own names, before the prefix (READER_VERSION 33)
_ALWAYS_HELD = 2
_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Unreadable:
    """A profile known to be unreadable, kept as plain text: a cached exception object
    would be raised again and again, its traceback growing with every raise and pinning
    each raise's frames (31-230 KB a `runs` request while one run is unreadable)."""

    path: str
    reason: str
    # stopped by this process, not by the file (``OverLimit``, ``NotReadableNow``): never
    # kept, the next request tries again
    passing: type[ProfileError] | None = None

    def error(self) -> ProfileError:
        return (self.passing or ProfileError)(self.path, self.reason)


@dataclasses.dataclass(frozen=True)
class ProfileSummary:
    """What a listing shows of a read profile: its facts, and its ops' names, which pairing
    and model identity compare runs by. No tables: a command lists the runs a cache holds
    from their summaries without importing pandas (``Catalog(one_shot=True)``)."""

    facts: ProfileFacts
    op_names: frozenset[str]


class _StoredTexts(msgspec.Struct):
    """A text column of repeating texts, as ``_stored_column`` keeps it."""

    texts: list[str]
    codes: bytes


class _StoredOpNames(msgspec.Struct):
    op_name: list[str] | _StoredTexts = msgspec.field(default_factory=list)


class _StoredSummary(msgspec.Struct):
    """The part of a disk entry (``profile_columns``) a summary is made of; msgspec passes
    over the rest of the entry without building it."""

    key: str
    facts: dict | None = None
    ops: _StoredOpNames | None = None
    error: dict | None = None


class _Flight:
    def __init__(self):
        self.done = threading.Event()
        self.result: OpProfile | None = None
        self.error: _Unreadable | None = None

    def outcome(self) -> OpProfile:
        """The parse's profile, or its error raised."""
        if self.error is not None:
            raise self.error.error()
        if self.result is None:
            raise RuntimeError("a read ended with neither a profile nor an error")
        return self.result


class ProfileCache:
    def __init__(
        self,
        cache_dir: str | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        disk_bytes: int | None = None,
    ):
        """``cache_dir=None`` keeps profiles in memory only; ``disk_bytes`` bounds the folder
        (None: ``settings.cache_max_bytes()``)."""
        self.cache_dir = cache_dir
        self.memory_bytes = memory_bytes
        self.disk_bytes = disk_bytes if disk_bytes is not None else cache_max_bytes()
        self.parses: Counter = Counter()  # key -> times parsed in this process (tests and benchmarks read it)
        self._lock = threading.Lock()
        self._memory: OrderedDict[tuple, tuple[OpProfile | _Unreadable, int]] = OrderedDict()
        self._held_bytes = 0
        self._versions: dict[tuple, tuple] = {}  # a session's files (no versions) -> its key held in memory
        self._flights: dict[tuple, _Flight] = {}
        self._disk_warning_given = False

    # -- lookups ------------------------------------------------------------------------------

    def peek(self, key: tuple) -> OpProfile | None:
        """The profile if memory or disk has it; never parses. Raises its ProfileError if
        the file is known to be unreadable."""
        with self._lock:
            entry = self._memory.get(key)
            if entry is not None:
                self._memory.move_to_end(key)
        if entry is None:
            entry_value = self._load_from_disk(key)
            if entry_value is None:
                return None
            self._remember(key, entry_value)
            value = entry_value
        else:
            value = entry[0]
        if isinstance(value, _Unreadable):
            raise value.error()
        return value

    def peek_summary(self, key: tuple) -> ProfileSummary | None:
        """``peek``'s profile as its summary; from disk without making its tables (and
        without keeping anything in memory: a listing's process ends with it)."""
        with self._lock:
            entry = self._memory.get(key)
        if entry is not None:
            value = entry[0]
        else:
            value = self._load_from_disk(key, summary=True)
            if value is None:
                return None
        if isinstance(value, _Unreadable):
            raise value.error()
        return value if isinstance(value, ProfileSummary) else ProfileSummary(value.facts, value.op_names)

    def holds(self, key: tuple) -> bool:
        """Whether memory or disk holds ``key`` (a profile or a known failure); reads nothing."""
        with self._lock:
            if key in self._memory:
                return True
        return bool(self.cache_dir) and os.path.exists(self._path(key))

    def get(self, key: tuple, parse: Callable[[], OpProfile | Encoded]) -> OpProfile:
        """The profile for ``key``, parsing it (once, however many threads ask) if needed;
        ``parse`` may give it with its disk entry made (``Encoded``: read in a worker)."""
        cached = self.peek(key)
        if cached is not None:
            return cached
        with self._lock:
            # Look again under the lock: a parse may have finished since the peek.
            entry = self._memory.get(key)
            following = self._flights.get(key)
            if entry is None and following is None:
                flight = self._flights[key] = _Flight()
        if entry is not None:
            if isinstance(entry[0], _Unreadable):
                raise entry[0].error()
            return entry[0]
        if following is not None:
            following.done.wait()
            return following.outcome()
        try:
            with self._lock:
                self.parses[key] += 1
            made: bytes | None = None
            try:
                parsed = parse()
                flight.result, made = (parsed.profile, parsed.entry) if isinstance(parsed, Encoded) else (parsed, None)
            except ProfileError as error:
                passing = type(error) if isinstance(error, (OverLimit, NotReadableNow)) else None
                flight.error = _Unreadable(error.path, error.reason, passing)
            if flight.error is None or not flight.error.passing:  # the next read may pass
                value = flight.result if flight.error is None else flight.error
                self._remember(key, value)
                self._store_on_disk(key, value, made)
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()
        return flight.outcome()

    def put(
        self, key: tuple, profile: OpProfile | Encoded | None = None, unreadable: tuple[str, str] | None = None
    ) -> None:
        """Keep a profile (or, with ``unreadable``, its path and reason) found elsewhere, the
        shared index or a worker (``Encoded``): in memory and on disk, as if this process had
        parsed it."""
        entry = profile.entry if isinstance(profile, Encoded) else None
        profile = profile.profile if isinstance(profile, Encoded) else profile
        value = profile if unreadable is None else _Unreadable(*unreadable)
        self._remember(key, value)
        self._store_on_disk(key, value, entry)

    # -- memory -------------------------------------------------------------------------------

    def _remember(self, key: tuple, value) -> None:
        size = value.memory_bytes() if not isinstance(value, _Unreadable) else 1024
        session = _session_of(key)
        with self._lock:
            self._forget(key)
            # The session's files as they were before (touched, rewritten, synced again: its
            # key names their old sizes and times) are never asked for again: held until the
            # bound, a server whose profiles or index changed under it grew by every version.
            superseded = self._versions.get(session) if session is not None else None
            if superseded is not None and superseded != key:
                self._forget(superseded)
            self._memory[key] = (value, size)
            self._held_bytes += size
            if session is not None:
                self._versions[session] = key
            # The two most recent stay whatever their size: they are the pair being compared,
            # and evicting one half to hold the other would read both again on every request.
            while self._held_bytes > self.memory_bytes and len(self._memory) > _ALWAYS_HELD:
                self._forget(next(iter(self._memory)))

    def _forget(self, key: tuple) -> None:
        """Drop ``key`` from memory, if held (the caller holds the lock)."""
        held = self._memory.pop(key, None)
        if held is None:
            return
        self._held_bytes -= held[1]
        session = _session_of(key)
        if session is not None and self._versions.get(session) == key:
            del self._versions[session]

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    # -- disk ---------------------------------------------------------------------------------

    def _path(self, key: tuple) -> str:
        if self.cache_dir is None:
            raise ValueError("no cache folder to hold an entry")  # its callers ask only with one
        digest = hashlib.sha256(repr((READER_VERSION, _DISK_FORMAT, key)).encode("utf-8")).hexdigest()
        return os.path.join(self.cache_dir, digest[:2], digest + ".msgpack")

    def _load_from_disk(self, key: tuple, summary: bool = False):
        """The entry of ``key`` (a profile, its summary, or the error reading it), or None
        where there is none or it cannot be used: an entry is untrusted input (a damaged
        file, another version's, another program's), so a fault in it is a warning and a
        fresh read, never an error."""
        if not self.cache_dir:
            return None
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
                used = os.fstat(handle.fileno()).st_mtime
            entry = _SUMMARY_DECODER.decode(data) if summary else None
            stored: dict = {} if summary else msgspec.msgpack.decode(data)  # a whole entry: a map
            if time.time() - used > _TOUCH_AFTER_SECONDS:
                _touch(path)
            return _entry_summary(entry, key) if entry is not None else _entry_profile(stored, key)
        except FileNotFoundError:  # never written, or pruned (by this process or another)
            return None
        except Exception as error:  # noqa: BLE001 - untrusted: whatever is wrong with it, read the files again
            _logger.warning("op_compare: ignoring an unreadable cache entry for %s: %s", key[1][0][0], error)
            return None

    def _store_on_disk(self, key: tuple, value, entry: bytes | None = None) -> None:
        """Write the entry of ``key`` (``entry``: made already, by a worker)."""
        if not self.cache_dir:
            return
        if entry is None:
            entry = (
                msgspec.msgpack.encode({"key": repr(key), "error": {"path": value.path, "reason": value.reason}})
                if isinstance(value, _Unreadable)
                else entry_bytes(key, value)
            )
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle, scratch = tempfile.mkstemp(
                dir=os.path.dirname(path), prefix=_SCRATCH_PREFIX, suffix=_SCRATCH_SUFFIX
            )
            with os.fdopen(handle, "wb") as out:
                out.write(entry)
            os.replace(scratch, path)
            self._after_write(self.cache_dir, len(entry), keep=path)
        except OSError as error:
            if not self._disk_warning_given:
                self._disk_warning_given = True
                _logger.warning(
                    "op_compare: cannot write the profile cache in %s (%s); keeping profiles in memory only",
                    self.cache_dir,
                    error,
                )

    def _after_write(self, cache_dir: str, size: int, keep: str) -> None:
        """Prune the folder on this process's first write to it and after each tenth of the
        bound written since (``prune_cache``), never deleting the entry just written. The
        count is the process's, not the catalog's: an index worker makes a catalog a session."""
        with _PRUNE_LOCK:
            written = _WRITTEN_SINCE_PRUNE.get(cache_dir)
            due = written is None or written + size >= _PRUNE_EVERY_SHARE * self.disk_bytes
            _WRITTEN_SINCE_PRUNE[cache_dir] = 0 if written is None or due else written + size
        if due:
            self.prune(keep=keep)

    def prune(self, keep: str | None = None) -> int:
        """Take the folder down to its bound now (``prune_cache``); the bytes freed."""
        return prune_cache(self.cache_dir, self.disk_bytes, keep=keep) if self.cache_dir else 0


def _session_of(key: tuple) -> tuple | None:
    """The files a key names without their versions, ``(format, (path, ...))``; None for a
    key of another shape (a key is ``(format, ((path, size, mtime), ...))``)."""
    try:
        file_format, signatures = key
        return file_format, tuple(path for path, _, _ in signatures)
    except (TypeError, ValueError):
        return None


def prune_cache(cache_dir: str, disk_bytes: int, keep: str | None = None) -> int:
    """Delete the entries of ``cache_dir`` used longest ago until it holds at most
    ``_PRUNE_TO_SHARE`` of ``disk_bytes``, if it holds more than ``disk_bytes``; delete the
    scratch files of writes that died. Only what this cache writes is looked at (its
    entries and scratch files, in its two-letter folders). Entries of older reader
    versions are never loaded again, so they age out first. Other processes may prune or
    load at the same time: a file gone already counts as freed, and a pruned entry is only
    read again. Returns the bytes freed."""
    entries, total, freed = [], 0, 0
    now = time.time()
    try:
        folders = [
            entry.path
            for entry in os.scandir(cache_dir)
            if _FOLDER.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
        ]
    except OSError:
        return 0
    for folder in folders:
        try:
            found = list(os.scandir(folder))
        except OSError:
            continue
        for entry in found:
            try:
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if _ENTRY.fullmatch(entry.name):
                entries.append((stat.st_mtime, stat.st_size, entry.path))
                total += stat.st_size
            elif (
                (entry.name.startswith(_SCRATCH_PREFIX) and entry.name.endswith(_SCRATCH_SUFFIX))
                or _OLD_SCRATCH.fullmatch(entry.name)
            ) and now - stat.st_mtime > _STALE_SCRATCH_SECONDS:
                freed += _remove(entry.path, stat.st_size)
    if total <= disk_bytes:
        return freed
    entries.sort()
    target = _PRUNE_TO_SHARE * disk_bytes
    for _, size, path in entries:
        if total <= target:
            break
        if path != keep:
            removed = _remove(path, size)
            freed += removed
            total -= removed
    return freed


def _remove(path: str, size: int) -> int:
    """The bytes the folder no longer holds: ``size`` once the file is gone (deleted here,
    or by another process first), 0 where it may not be deleted (a read-only cache)."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError:
        return 0
    return size


def _touch(path: str) -> None:
    """Mark an entry used now: pruning deletes the entries used longest ago."""
    try:
        os.utime(path)
    except OSError:  # a read-only cache folder: it is then never pruned by this process either
        pass


_SUMMARY_DECODER = msgspec.msgpack.Decoder(_StoredSummary)


def _entry_summary(entry: _StoredSummary, key: tuple):
    """A summary entry's value: None where it is another key's or this version wrote none."""
    if entry.key != repr(key):
        return None
    if entry.error is not None:
        return _Unreadable(entry.error["path"], entry.error["reason"])
    if entry.facts is None or entry.ops is None:
        return None  # not an entry this version writes
    names = entry.ops.op_name
    return ProfileSummary(
        ProfileFacts(**entry.facts), frozenset(names.texts if isinstance(names, _StoredTexts) else names)
    )


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A profile read in a worker, with its disk entry (``entry_bytes``), which the worker
    sends back in its place: msgpack of the disk's form is made in half the time of a
    pickle and loaded as fast, and the command writes it to the disk cache as it is
    instead of encoding the profile again (a million-op profile: 0.8 s to pickle, 0.4 s to
    encode, 0.2-0.4 s either way to load)."""

    profile: OpProfile
    entry: bytes


def entry_bytes(key: tuple, profile: OpProfile) -> bytes:
    """The disk cache's entry of a profile read for ``key``."""
    return msgspec.msgpack.encode({"key": repr(key), **profile_columns(profile, numbers_as_bytes=True)})


def encoded(key: tuple, entry: bytes) -> Encoded | None:
    """The profile a worker sent as its entry (``entry_bytes``), or None where the entry is
    not one of a profile of ``key`` (the caller reads the session itself)."""
    try:
        profile = _entry_profile(msgspec.msgpack.decode(entry), key)
    except Exception:  # noqa: BLE001 - whatever is wrong with it, the session is read again
        return None
    return None if profile is None or isinstance(profile, _Unreadable) else Encoded(profile, entry)


def _entry_profile(stored: dict, key: tuple):
    """A whole entry's value: None where it is another key's."""
    if stored.get("key") != repr(key):
        return None  # a hash collision, or a file from elsewhere
    if "error" in stored:
        return _Unreadable(stored["error"]["path"], stored["error"]["reason"])
    return profile_from_columns(stored)


# A profile as plain columns (``ops`` as column -> list, ``facts`` as a dict): the form the
# disk cache stores and the shared index's Parquet tables hold, each table under its name
# in ``schema.optable.TABLES``.


def profile_columns(profile: OpProfile, numbers_as_bytes: bool = False) -> dict:
    """``numbers_as_bytes``: the disk cache's form (``_stored_column``), each numeric column
    as its array's bytes and dtype, not a list: the 31 MB xplane's 327,600 step cells took
    22 ms to decode and 110 ms to make frames of as lists of numbers, 7 and 6 ms as bytes."""
    from tb_opcompare.schema.optable import TABLES

    stored = {"facts": dataclasses.asdict(profile.facts), "step_count": profile.step_count}
    for name, attribute, _ in TABLES:
        table = getattr(profile, attribute)
        if numbers_as_bytes:
            columns: dict[str, Any] = {}
            for column, values in table.items():
                lists = {other: table[other] for other, kept in columns.items() if isinstance(kept, list)}
                columns[column] = _stored_column(values, lists)
            stored[name] = columns
        else:
            stored[name] = {column: values.tolist() for column, values in table.items()}
    return stored


# How ``profile_columns(numbers_as_bytes=True)`` writes a column; part of the disk cache's key,
# so an entry of another form is never read as this one.
_DISK_FORMAT = "numbers as bytes, texts shared"

# Texts a column's sample for whether its texts repeat.
_TEXTS_SAMPLED = 4096


def _stored_column(values, lists: dict):
    """A column as the disk cache keeps it. Numbers: their bytes and dtype. Texts: the name
    of an earlier column kept as a list (``lists``) with the same texts (a PyTorch op's
    type is its name); else, where they repeat (a row's side, an op's type), the distinct
    texts and a code a row; else the list. Each text is then decoded once, and the loaded
    table shares it (a million-op profile's load spent 0.28 s decoding its side, name and
    type lists). An empty column, or one not of texts alone, is a list."""
    if values.dtype.kind in "iufb":
        return {"dtype": values.dtype.str, "bytes": values.tobytes()}
    listed = values.tolist()
    sample = listed[:: max(1, len(listed) // _TEXTS_SAMPLED)]
    if not listed or not all(type(value) is str for value in sample):  # nothing, or not texts alone
        return listed
    for name, earlier in lists.items():
        if earlier.dtype == object and bool((earlier[:64] == values[:64]).all()) and bool((earlier == values).all()):
            return {"same_as": name}
    if len(set(sample)) * 2 > len(sample):  # mostly distinct (op names): the list
        return listed
    from tb_opcompare.schema.groups import first_appearance

    try:
        codes, distinct = first_appearance(listed)
    except TypeError:  # an unhashable value the sample missed
        return listed
    return {"texts": distinct, "codes": codes.astype("<i4").tobytes()}


def _loaded_column(values, loaded: dict):
    """A column ``_stored_column`` wrote (or a list, as the shared index gives them);
    ``loaded``: the table's columns before it. A reference or code out of range is a
    ValueError (a damaged entry)."""
    if not isinstance(values, dict):
        return values
    import numpy as np

    if "same_as" in values:
        if values["same_as"] not in loaded:
            raise ValueError(f"a column refers to {values['same_as']!r}, which is not before it")
        return loaded[values["same_as"]]
    if "texts" in values:
        from tb_opcompare.schema.table import text_array

        texts, codes = text_array(values["texts"]), np.frombuffer(values["codes"], dtype="<i4")
        if len(codes) and not (0 <= codes.min() and codes.max() < len(texts)):
            raise ValueError("a text column's codes are out of range")
        return texts[codes]
    return np.frombuffer(values["bytes"], dtype=values["dtype"])  # read-only, as a table's columns are


def profile_from_columns(stored: dict) -> OpProfile:
    from tb_opcompare.schema.optable import TABLES, OpProfile, typed_table

    tables = {}
    for name, _, dtypes in TABLES:
        loaded: dict = {}
        for column, values in stored[name].items():
            loaded[column] = _loaded_column(values, loaded)
        tables[name] = typed_table(loaded, dtypes)
    return OpProfile.of_tables(ProfileFacts(**stored["facts"]), stored["step_count"], tables)
