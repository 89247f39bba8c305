"""File access for local logdirs and remote ones.

Local paths use ``os`` directly (fast, and gives modification times). Paths with a
scheme (``s3://``, ``gs://``, ``az://``, ...) go through fsspec where it has the scheme's
filesystem installed (``pip install tb-opcompare[s3]``): one recursive listing of the
logdir (``find``: 1 request a thousand keys, where a walk of ``ls`` calls made one a
folder), sizes and modification times from that listing, whole reads with ``cat_file``
and heads with a range read. Credentials and endpoints come from each library's standard
environment (``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, ``GOOGLE_APPLICATION_CREDENTIALS``).
Without fsspec's filesystem for a scheme, TensorBoard's own file layer
(``tensorboard.compat.tensorflow_stub``'s gfile) is used, as TensorBoard reads there.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import errno
import os
import posixpath
import stat
from collections.abc import Callable, Iterator


class NotARegularFile(OSError):
    """A path that is a FIFO, a device, a socket or a directory: reading it could block
    forever (a FIFO without a writer) or never end (``/dev/zero``)."""


def is_remote(path: str) -> bool:
    return "://" in path


def join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if is_remote(base) else os.path.join(base, *parts)


OUTSIDE = "a link to a file outside the logdir"
OUTSIDE_FOLDER = "a link to a folder outside the place it was found in"


MAX_DEPTH = 64  # directory levels below the logdir walked; a profile sits 4 to 6 below its run
# Pseudo-filesystems a link must never lead the walk into: /proc holds every process's
# working directory (a walk found 59-66 "runs" and read gigabytes there), /sys and /dev
# hold devices
SYSTEM_TREES = ("/proc", "/sys", "/dev")


class Walk:
    """Like os.walk over a logdir, sorted. Directory links are followed, each real
    directory once (a cycle ends there), except a link to a directory that holds the
    logdir (``/``, a parent): walking it would walk everything around the logdir.
    ``refused(path, reason)`` hears of each directory not entered. The real paths walked
    (the logdir and each linked directory) are the places files may be read from."""

    def __init__(self, root: str, refused: Callable[[str, str], None] | None = None):
        self.root = root
        self.refused = refused
        self.real_roots = [root if is_remote(root) else os.path.realpath(root)]
        # a remote logdir's listing, made at the first walk: a second walk of this Walk
        # (discovery's, after it read the heads it needs at once) makes no request
        self._listed: tuple[dict, dict] | None = None

    def __iter__(self) -> Iterator[tuple[str, list[str], list[str]]]:
        if is_remote(self.root):
            remote = _remote(self.root)
            if remote is None:
                from tensorboard.compat.tensorflow_stub.io import gfile

                yield from gfile.walk(self.root)
            else:
                try:
                    if self._listed is None:
                        self._listed = _remote_listing(remote, self.root, self._refuse)
                except Exception as error:  # no such bucket, no credentials, no endpoint: named, never a traceback
                    self._listed = ({}, {})
                    self._refuse(self.root, f"cannot list it: {_said(error)}")
                yield from _listed_walk(self.root.rstrip("/"), *self._listed)
            return
        real_root = self.real_roots[0]
        seen: set[str] = set()
        top = self.root.rstrip(os.sep).count(os.sep)
        for directory, subdirs, files in os.walk(self.root, followlinks=True, onerror=self._unreadable):
            real = os.path.realpath(directory)
            if real in seen:
                subdirs[:] = []
                continue
            seen.add(real)
            if subdirs and directory.rstrip(os.sep).count(os.sep) - top >= MAX_DEPTH:
                # os.walk recurses: a tree thousands of levels deep would end in a RecursionError
                for name in sorted(subdirs):
                    self._refuse(
                        os.path.join(directory, name), f"deeper than {MAX_DEPTH} levels below the logdir; not walked"
                    )
                subdirs[:] = []
            kept = []
            for name in sorted(subdirs):
                path = os.path.join(directory, name)
                if not os.path.islink(path):  # a plain subdirectory stays in the place its parent is in
                    kept.append(name)
                    continue
                target = os.path.realpath(path)
                if target != real_root and within(target, real_root):  # the logdir itself: a cycle, walked once
                    self._refuse(
                        os.path.join(directory, name), f"a link to {target}, which holds the logdir; not followed"
                    )
                    continue
                if any(within(system, target) for system in SYSTEM_TREES):
                    self._refuse(
                        os.path.join(directory, name),
                        f"a link into {target}, the system's live tables "
                        "(processes, devices), not profiles; not followed",
                    )
                    continue
                if not self.allows(target):
                    self.real_roots.append(target)
                kept.append(name)
            subdirs[:] = kept
            yield directory, subdirs, sorted(files)

    def allows(self, real_path: str) -> bool:
        return any(within(root, real_path) for root in self.real_roots)

    def refusal(self, path: str) -> str | None:
        """Why ``path`` must not be read, or None for a regular file in a walked place.
        Only ``stat``: never opens it."""
        if is_remote(path):
            return None
        try:
            info = os.lstat(path)
            linked = stat.S_ISLNK(info.st_mode)
            if linked:
                info = os.stat(path)
        except OSError as error:
            return f"cannot read the file: {error.strerror or error}"
        if stat.S_ISDIR(info.st_mode):
            return "a directory named like a trace file, not a trace"
        if not stat.S_ISREG(info.st_mode):
            return f"not a regular file ({_kind(info.st_mode)}); not read, as it could block or never end"
        if linked:  # only a link can lead out of the walked places
            target = os.path.realpath(path)
            if not self.allows(target):
                return f"{OUTSIDE} ({target}); not read"
        return None

    def _unreadable(self, error: OSError) -> None:
        if error.filename and os.path.realpath(error.filename) != self.real_roots[0]:
            self._refuse(error.filename, f"cannot list this directory: {error.strerror or error}")

    def _refuse(self, path: str, reason: str) -> None:
        if self.refused:
            self.refused(path, reason)


def within(real_root: str, real_path: str) -> bool:
    return real_path == real_root or real_path.startswith(real_root.rstrip(os.sep) + os.sep)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


# The places a read may open files in: the real paths a listing walked (``Walk.real_roots``),
# set around a run's read (``confined``); None outside one (tests and tools reading a file).
_PLACES: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("opcompare_places", default=None)


@contextlib.contextmanager
def confined(places: tuple[str, ...] | None):
    """Reads within this block open only files whose real path lies in ``places``."""
    token = _PLACES.set(tuple(places) if places else None)
    try:
        yield
    finally:
        _PLACES.reset(token)


def open_regular(path: str):
    """Open for reading without blocking on a FIFO, and refuse anything but a regular
    file, and, inside ``confined``, anything outside the places the listing walked: both
    checked on the open descriptor, so a file swapped for a link after the listing (to
    ``/etc/passwd``, to another user's trace) is refused, never read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(0, f"not a regular file ({_kind(info.st_mode)})", path)
        places = _PLACES.get()
        if places:
            real = _real_path(descriptor, path, info)
            if real is None or not any(within(place, real) for place in places):
                raise NotARegularFile(0, f"{OUTSIDE} ({real or 'unknown'}); not read", path)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _real_path(descriptor: int, path: str, info: os.stat_result) -> str | None:
    """The real path of what the descriptor opened: the kernel's own name for it where
    ``/proc`` gives it, else the path resolved now, if it is still the same file."""
    try:
        return os.readlink(f"/proc/self/fd/{descriptor}")
    except OSError:
        real = os.path.realpath(path)
        try:
            now = os.stat(real)
        except OSError:
            return None
        return real if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino) else None


# Remote files' bytes already fetched (``fetched``): a read of one of them makes no request.
_FETCHED: contextvars.ContextVar[dict[str, bytes] | None] = contextvars.ContextVar("opcompare_fetched", default=None)


@contextlib.contextmanager
def fetched(contents: dict[str, bytes]):
    """Within this block, ``read_bytes`` of a remote path in ``contents`` answers its bytes:
    a bucket's files fetched at once (``read_many``), then parsed one after the other, where
    each read was a round trip of its own."""
    token = _FETCHED.set(contents)
    try:
        yield
    finally:
        _FETCHED.reset(token)


def read_bytes(path: str) -> bytes:
    if is_remote(path):
        given = _given(path)
        if given is not None:
            return given
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path):
                return remote.cat_file(path)
        from tensorboard.compat.tensorflow_stub.io import gfile

        with gfile.GFile(path, "rb") as handle:
            return handle.read()
    with open_regular(path) as handle:
        return handle.read()


def _given(path: str) -> bytes | None:
    """The remote file's bytes where they were fetched already (``fetched``)."""
    given = _FETCHED.get()
    return given.get(path) if given is not None else None


def read_head(path: str, size: int) -> bytes:
    if is_remote(path):
        given = _given(path)
        if given is not None:
            return given[:size]
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path):
                return remote.cat_file(path, start=0, end=size)  # one range request
        from tensorboard.compat.tensorflow_stub.io import gfile

        with gfile.GFile(path, "rb") as handle:
            return handle.read(size)
    with open_regular(path) as handle:
        return handle.read(size)


def read_tail(path: str, size: int) -> bytes | None:
    """The last ``size`` bytes of a file (one range request where it is remote); None
    where the store reads no ranges (TensorBoard's gfile)."""
    if is_remote(path):
        remote = _remote(path)
        if remote is None:
            return None
        total, _ = signature(path)
        with _as_os_error(path):
            return remote.cat_file(path, start=max(0, total - size), end=total)
    with open_regular(path) as handle:
        end = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, end - size))
        return handle.read()


def signature(path: str) -> tuple[int, float]:
    """(size, mtime) to tell when a file changed: a remote object's from the last
    listing where it holds it (no request), its modification time where the store gives
    one (0 under TensorBoard's gfile)."""
    if is_remote(path):
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path):
                info = _info(remote, path)  # from the last listing's details, refreshed at each listing
            return int(info.get("size") or 0), _modified(info)
        from tensorboard.compat.tensorflow_stub.io import gfile

        return gfile.stat(path).length, 0.0
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime


def is_gone(path: str) -> bool:
    """Whether the file is not there (one that cannot be asked about now is not gone)."""
    try:
        signature(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def fingerprint(path: str) -> dict:
    """What tells whether a file is still the one a shared index was made from: its size,
    modification time and, where the store gives one, its content tag (S3's ETag, GCS's
    generation), all from the last listing where it holds them (no request)."""
    size, modified = signature(path)
    tag = None
    if is_remote(path):
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path):
                info = _info(remote, path)
            tag = next(
                (str(info[key]).strip('"') for key in ("ETag", "etag", "generation", "md5Hash") if info.get(key)), None
            )
    return {"size": size, "mtime": modified, "etag": tag}


ENDS_BYTES = 65536


def read_ends(path: str) -> bytes:
    """The first and last ``ENDS_BYTES`` of a file (two range reads where it is remote):
    enough to tell a copied file (new modification time, same bytes) from a rewritten one."""
    size, _ = signature(path)
    given = _given(path) if is_remote(path) else None
    if size <= 2 * ENDS_BYTES or given is not None:
        data = given if given is not None else read_bytes(path)
        return data if len(data) <= 2 * ENDS_BYTES else data[:ENDS_BYTES] + data[-ENDS_BYTES:]
    if is_remote(path):
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path):
                return remote.cat_file(path, start=0, end=ENDS_BYTES) + remote.cat_file(
                    path, start=size - ENDS_BYTES, end=size
                )
        data = read_bytes(path)  # TensorBoard's gfile: no range reads, so one whole read
        return data[:ENDS_BYTES] + data[-ENDS_BYTES:]
    with open_regular(path) as handle:
        head = handle.read(ENDS_BYTES)
        handle.seek(size - ENDS_BYTES)
        return head + handle.read(ENDS_BYTES)


def content_digest(path: str) -> str:
    """A fast hash of a file's whole content (BLAKE2b, 128 bits; about 0.06-0.09 s for a
    32 MB xplane on this project's 2-core VM, a fifth of reading it), read in 1 MiB blocks,
    a remote object whole."""
    import hashlib

    digest = hashlib.blake2b(digest_size=16)
    if is_remote(path):
        digest.update(read_bytes(path))
        return digest.hexdigest()
    block = bytearray(1 << 20)
    view = memoryview(block)
    with open_regular(path) as handle:
        while count := handle.readinto(block):
            digest.update(view[:count])
    return digest.hexdigest()


def read_many(paths: list[str], most: int | None = None) -> dict[str, bytes | OSError]:
    """Each file's bytes, or the OSError that reading it raised: a remote store's in one
    call, its requests sent concurrently. ``most``: a local file is read no further than
    one byte past it, so a caller can refuse a file too big without holding all of it."""
    found: dict[str, bytes | OSError] = {}
    remote = _remote(paths[0]) if paths and is_remote(paths[0]) else None
    if remote is not None:
        try:
            fetched = remote.cat(list(paths), on_error="return")
        except TimeoutError:  # one object that does not answer costs its own read, not the others'
            fetched = {path: _read_or_error(path) for path in paths}
        except Exception as error:
            fetched = {path: error for path in paths}
        for path in paths:
            value = fetched.get(path, fetched.get(path.split("://", 1)[1], FileNotFoundError(path)))
            found[path] = (
                value if isinstance(value, bytes) else (value if isinstance(value, OSError) else OSError(_said(value)))
            )
        return found
    for path in paths:
        try:
            found[path] = read_bytes(path) if most is None else read_head(path, most + 1)
        except OSError as error:
            found[path] = error
    return found


def read_heads(paths: list[str], size: int) -> dict[str, bytes]:
    """The first ``size`` bytes of each remote file, its range reads sent concurrently (one
    call): discovery looks into thousands of JSON files of a bucket, one request each,
    where one after the other took a cold listing of 1,000 runs among 9,000 other objects
    88 s. A file that could not be read is left out (its own read says why); a local one
    too (a read of its head costs no round trip)."""
    remote = _remote(paths[0]) if paths and is_remote(paths[0]) else None
    if remote is None:
        return {}
    try:
        fetched = remote.cat_ranges(list(paths), [0] * len(paths), [size] * len(paths), on_error="return")
    except Exception:  # a deadline passed, the store refused: each is read alone, and says why
        return {}
    return {path: value for path, value in zip(paths, fetched) if isinstance(value, bytes)}


RANGE_GAP = 1 << 16  # ranges of one file this close are read as one


def read_ranges(ranges: list[tuple[str, int, int]]) -> list[bytes | OSError]:
    """The bytes ``start`` to ``end`` of each (path, start, end), or the OSError reading
    them raised: ranges of one file that touch or lie within ``RANGE_GAP`` of each other
    read as one (the sessions of a batch, read together: one request), a remote store's
    requests sent concurrently, in one call."""
    merged: list[list] = []  # [path, start, end, members]
    for position, (path, start, end) in sorted(enumerate(ranges), key=lambda item: item[1]):
        last = merged[-1] if merged else None
        if last is not None and last[0] == path and start <= last[2] + RANGE_GAP:
            last[2] = max(last[2], end)
            last[3].append(position)
        else:
            merged.append([path, start, end, [position]])
    found: list[bytes | OSError] = [b""] * len(ranges)
    for (_, start, end, members), data in zip(merged, _read_ranges([tuple(read[:3]) for read in merged])):
        for position in members:
            _, own_start, own_end = ranges[position]
            found[position] = (
                data
                if isinstance(data, OSError)
                else data[own_start - start : own_end - start]
                if len(data) >= own_end - start
                else OSError(f"{ranges[position][0]}: shorter than {own_end:,} bytes")
            )
    return found


def _read_ranges(ranges: list[tuple[str, int, int]]) -> list[bytes | OSError]:
    remote = _remote(ranges[0][0]) if ranges and is_remote(ranges[0][0]) else None
    if remote is not None:
        paths, starts, ends = (list(column) for column in zip(*ranges))
        try:
            fetched = remote.cat_ranges(paths, starts, ends, on_error="return")
        except Exception as error:  # a deadline passed, the store refused: every range says so
            fetched = [error] * len(ranges)
        return [
            value if isinstance(value, bytes) else value if isinstance(value, OSError) else OSError(_said(value))
            for value in fetched
        ]
    found: list[bytes | OSError] = []
    for path, start, end in ranges:
        if is_remote(path):  # TensorBoard's gfile: no range reads
            found.append(OSError(f"{path}: no range reads where fsspec has no filesystem for it"))
            continue
        try:
            with open_regular(path) as handle:
                handle.seek(start)
                found.append(handle.read(end - start))
        except OSError as error:
            found.append(error)
    return found


def _read_or_error(path: str) -> bytes | OSError:
    try:
        return read_bytes(path)
    except OSError as error:
        return error


def write_bytes(path: str, data: bytes) -> None:
    """Write a whole file so that no reader ever sees part of it: locally under a
    temporary name, then renamed; to an object store in one put (an object appears whole
    or not at all). Raises OSError (a read-only logdir, a bucket that denies writes)."""
    if is_remote(path):
        remote = _remote(path)
        if remote is None:
            from tensorboard.compat.tensorflow_stub.io import gfile

            with gfile.GFile(path, "wb") as handle:
                handle.write(data)
            return
        with _as_os_error(path):
            remote.pipe_file(path, data)
        return
    import tempfile

    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    _refuse_outside(directory)
    handle, scratch = tempfile.mkstemp(dir=directory, prefix=".writing-")
    try:
        os.fchmod(handle, 0o666 & ~current_umask())  # as open() would make it: mkstemp's 0600 shuts a team out
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


def _refuse_outside(directory: str) -> None:
    """Inside ``confined``, a write goes only where a read may: a folder on the way that is
    a link out of the places (another logdir's index) is refused, never written through.
    (The file itself is replaced by a rename, which never follows a link at its name.)"""
    places = _PLACES.get()
    if places:
        real = os.path.realpath(directory)
        if not any(within(place, real) for place in places):
            raise NotARegularFile(0, f"{OUTSIDE_FOLDER} ({real}); not written", directory)


def remove(path: str) -> None:
    """Delete a file (a local one only where ``confined`` lets it be read); one already
    gone is no error. Raises OSError."""
    if is_remote(path):
        remote = _remote(path)
        if remote is not None:
            with _as_os_error(path), contextlib.suppress(FileNotFoundError):
                remote.rm_file(path)
        return
    _refuse_outside(os.path.dirname(path))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def files_below(root: str) -> list[str]:
    """Every object below a remote folder, relative to it, from one recursive listing
    (none where nothing is there, or where the store cannot list: TensorBoard's gfile)."""
    remote = _remote(root)
    if remote is None:
        return []
    base = root.rstrip("/")
    prefix = base.split("://", 1)[1] + "/"
    with _as_os_error(root):
        try:
            keys = remote.find(base)
        except FileNotFoundError:
            return []
    keys = [key.split("://", 1)[-1] for key in keys]
    return [key[len(prefix) :] for key in keys if key.startswith(prefix)]


def _remote(url: str):
    """fsspec's filesystem for ``url``'s scheme (one per scheme and process: it keeps the
    listing's details), each request under a deadline (``_Deadlined``), or None where
    fsspec or that scheme's package is not installed."""
    protocol = url.split("://", 1)[0]
    try:
        import fsspec

        remote = fsspec.filesystem(protocol)
    except (ImportError, ValueError):
        return None
    _with_quick_times(remote)
    return _Deadlined(remote)


def _with_quick_times(remote) -> None:
    """An s3fs filesystem given, before its first request, the botocore session it would
    make itself (its ``set_session``: ``AioSession(**kwargs)``), whose parsers read times
    with ``_timestamp``: botocore reads each listed object's ``LastModified`` with
    dateutil's general parser, a fifth of listing a bucket of 10,000 objects (0.6 of 3.6
    s). Another store, a session already made or an s3fs that holds its session otherwise
    is left as it is."""
    if type(remote).__module__.split(".")[0] != "s3fs" or getattr(remote, "session", False) is not None:
        return
    try:
        from aiobotocore.session import AioSession

        session = AioSession(**remote.kwargs)
        session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_timestamp)
    except Exception:  # noqa: BLE001 - another aiobotocore: s3fs makes its own session, as ever
        return
    remote.session = session


def _timestamp(value):
    """botocore's ``parse_timestamp``, the same moment, read by ``datetime.fromisoformat``
    where the text is ISO 8601 with its zone (what S3's listings give:
    ``2026-11-30T10:56:11.000Z``, 30 times quicker); any other value is botocore's."""
    if isinstance(value, str) and len(value) > 10 and value[10] == "T":
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


REMOTE_SECONDS_ENV = "TB_OPCOMPARE_REMOTE_TIMEOUT_S"
REMOTE_SECONDS = 120.0  # a whole object of a few hundred MB over a slow link, and no more
_REQUESTS = frozenset({"cat", "cat_file", "cat_ranges", "find", "info", "pipe_file", "rm_file"})


def remote_seconds() -> float:
    """How long one request to a remote store may take (``TB_OPCOMPARE_REMOTE_TIMEOUT_S``)."""
    try:
        seconds = float(os.environ.get(REMOTE_SECONDS_ENV, REMOTE_SECONDS))
    except ValueError:
        return REMOTE_SECONDS
    return seconds if seconds > 0 else REMOTE_SECONDS


class _Deadlined:
    """An fsspec filesystem whose requests each end by a deadline, in a TimeoutError that
    says so: one object that never answered kept a listing of a bucket waiting past 7
    minutes (the client's own timeouts and retries, each attempt waiting a minute). The
    async stores (s3fs, gcsfs, adlfs) take the deadline on every call."""

    def __init__(self, remote):
        self._remote = remote

    def __getattr__(self, name: str):
        method = getattr(self._remote, name)
        if name not in _REQUESTS or not getattr(self._remote, "async_impl", False):
            return method
        seconds = remote_seconds()

        def with_deadline(*args, **kwargs):
            from fsspec.exceptions import FSTimeoutError

            try:
                return method(*args, timeout=seconds, **kwargs)
            except FSTimeoutError:
                raise TimeoutError(
                    errno.ETIMEDOUT, f"no answer from the store within {seconds:g} s ({REMOTE_SECONDS_ENV} sets it)"
                ) from None

        return with_deadline


@contextlib.contextmanager
def _as_os_error(path: str):
    """A remote store's failure as the OSError local reads raise (s3fs lets botocore's own
    errors through: no credentials, no endpoint), so every caller names the object."""
    try:
        yield
    except OSError:
        raise
    except Exception as error:
        raise OSError(_said(error)) from None


def _said(error: Exception) -> str:
    """An error in words: an OSError's own, else its type and message (botocore's)."""
    return (
        error.strerror if isinstance(error, OSError) and error.strerror else None
    ) or f"{type(error).__name__}: {error}"


def _modified(info: dict) -> float:
    """A remote object's modification time in seconds, whichever key its store uses."""
    for key in ("LastModified", "mtime", "updated", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return 0.0


# Each remote object's details from the last listing of the logdir it lies in, by its URL:
# fsspec's own listings cache searched a folder's list for each file it was asked about,
# which for 1,000 runs among 9,000 objects made an indexed listing take 20 s
_DETAILS: dict[str, dict] = {}


def _info(remote, path: str) -> dict:
    info = _DETAILS.get(path)
    return info if info is not None else remote.info(path)


def _remote_listing(remote, root: str, refuse: Callable[[str, str], None]) -> tuple[dict, dict]:
    """A remote logdir's folders, each with its files' names and its subfolders' names
    (``_listed_walk`` walks them), from one recursive listing. fsspec's listings cache is
    dropped first: it never expires, so a trace rewritten or added since the last listing
    would keep its old size or be unknown; the new listing's details are what
    ``signature`` reads."""
    protocol = root.split("://", 1)[0]
    base = root.rstrip("/")
    if not root.split("://", 1)[1].strip("/"):
        raise OSError("no bucket or container in the address")
    remote.invalidate_cache()  # all of it: s3fs drops a path's own entry, not its folders'
    listed = remote.find(base, withdirs=True, detail=True)
    for stale in [path for path in _DETAILS if path.startswith(base + "/")]:
        del _DETAILS[stale]
    too_deep = False
    files: dict[str, list[str]] = {base: []}  # folder -> its files' names
    for key, info in listed.items():
        path = (f"{protocol}://{key}" if "://" not in key else key).rstrip("/")
        if path == base:
            continue
        if "//" in path[len(base) :]:
            # a key with an empty segment (``run//trace.json``) names no file path: listed as
            # folders it made ``a/b`` a folder of no parent, and the whole listing failed
            if info.get("type") != "directory":  # a folder made of such a key goes with it, unsaid
                refuse(path, "a key with an empty segment ('//'), which names no file path; not listed")
            continue
        if path[len(base) :].count("/") > MAX_DEPTH:
            too_deep = True
            continue
        parent, name = posixpath.split(path)
        for folder in _parents(base, parent):  # a store without folder objects: made from the keys
            files.setdefault(folder, [])
        if info.get("type") == "directory":
            files.setdefault(path, [])
        else:
            files[parent].append(name)
            _DETAILS[path] = info
    subdirs: dict[str, list[str]] = {folder: [] for folder in files}
    for folder in files:
        if folder != base:
            parent, name = posixpath.split(folder)
            subdirs[parent].append(name)
    if too_deep:
        refuse(base, f"holds folders deeper than {MAX_DEPTH} levels below the logdir; they are not listed")
    return files, subdirs


def _listed_walk(base: str, files: dict, subdirs: dict) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk``'s triples of a remote listing (``_remote_listing``), top-down and sorted."""
    if base not in files:
        return
    pending = [base]
    while pending:
        folder = pending.pop()
        inside = sorted(subdirs[folder])
        yield folder, inside, sorted(files[folder])  # the caller may prune ``inside``, as with os.walk
        pending.extend(posixpath.join(folder, name) for name in reversed(inside))


def _parents(base: str, folder: str) -> Iterator[str]:
    while folder != base and folder.startswith(base + "/"):
        yield folder
        folder = posixpath.dirname(folder)
