"""Where ``tb-opcompare export --parquet DIR`` writes its tables, safely.

Before, each table was written into ``DIR/<table>/<table>.parquet`` in place: a
``DIR/ops`` that was a link to an outside folder had a file there overwritten, tables
left from an earlier export stayed beside the new ones (the documented glob then counted
256 rows for 128), and ``DIR = LOGDIR/.opcompare`` doubled the index's rows.

Now the tables are written into a new folder beside DIR (made here, so nothing in it is a
link), which is then renamed into place; an earlier export is renamed aside first and
deleted without following any link in it. A DIR that exists and is not an earlier export
(only folders of tables, each holding Parquet files) is refused unless ``overwrite``; a
DIR inside the logdir's index, or one that holds the logdir, always. In a bucket, where
nothing renames, the new tables are put, then the earlier export's other objects deleted.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile

from tb_opcompare.errors import UsageError
from tb_opcompare.ingest import fs
from tb_opcompare.ingest.discovery import INDEX_FOLDER
from tb_opcompare.schema.index_tables import PROFILE_TABLES, RUNS

TABLES = (RUNS, *PROFILE_TABLES)


def check_export_target(target: str, logdir: str, overwrite: bool) -> None:
    """Raise UsageError where ``target`` must not be written (before anything is read)."""
    inside, holds = _placed(target, logdir)
    if inside:
        raise UsageError(
            f"--parquet {target} is inside the logdir's shared index ({fs.join(logdir, INDEX_FOLDER)}), whose "
            "tables it would mix with the export's; write the export elsewhere",
            "parquet",
        )
    if holds:
        raise UsageError(f"--parquet {target} holds the logdir, which the export would replace", "parquet")
    if not overwrite and not _is_export(target):
        raise UsageError(
            f"--parquet {target} exists and is not an earlier export (folders {', '.join(TABLES)} of Parquet files "
            "only); give --overwrite to replace it",
            "parquet",
        )


def _placed(target: str, logdir: str) -> tuple[bool, bool]:
    """(whether ``target`` lies in the logdir's index, whether it holds the logdir), by
    real paths on disk (a link to the index is the index)."""
    if fs.is_remote(target) or fs.is_remote(logdir):
        target, logdir = target.rstrip("/"), logdir.rstrip("/")
        index = posixpath.join(logdir, INDEX_FOLDER)
        return _below(index, target, "/"), _below(target, logdir, "/")
    parent, name = os.path.split(os.path.abspath(target))
    real = os.path.join(os.path.realpath(parent), name)
    real_logdir = os.path.realpath(logdir)
    return fs.within(os.path.join(real_logdir, INDEX_FOLDER), real), fs.within(real, real_logdir)


def _below(root: str, path: str, separator: str) -> bool:
    return path == root or path.startswith(root + separator)


def _is_export(target: str) -> bool:
    """Nothing there, or what an export writes: folders named as its tables (never a
    link), each holding Parquet files only."""
    if fs.is_remote(target):
        return all(_exported_name(key) for key in fs.files_below(target))
    if not os.path.lexists(target):
        return True
    if os.path.islink(target) or not os.path.isdir(target):
        return False
    with os.scandir(target) as entries:
        for entry in entries:
            if entry.name not in TABLES or not entry.is_dir(follow_symlinks=False):
                return False
            with os.scandir(entry.path) as files:
                if not all(file.is_file(follow_symlinks=False) and file.name.endswith(".parquet") for file in files):
                    return False
    return True


def _exported_name(key: str) -> bool:
    table, _, name = key.partition("/")
    return table in TABLES and "/" not in name and name.endswith(".parquet")


def write_export(target: str, tables: dict[str, bytes], logdir: str, overwrite: bool) -> None:
    """Write ``tables`` (name -> one Parquet file) as the export at ``target``, whole or
    not at all. Raises UsageError (``check_export_target``) or OSError."""
    check_export_target(target, logdir, overwrite)  # again: the read took a while
    if fs.is_remote(target):
        _write_remote(target, tables)
        return
    parent, name = os.path.split(os.path.abspath(target))
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(dir=parent, prefix=f".{name}.writing-")
    try:
        os.chmod(scratch, 0o777 & ~fs.current_umask())  # mkdtemp's 0700 would shut the team out of the export
        for table, data in tables.items():
            os.mkdir(os.path.join(scratch, table))
            with open(os.path.join(scratch, table, f"{table}.parquet"), "xb") as out:  # new: never through a link
                out.write(data)
        _rename_into_place(scratch, target)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise


def _rename_into_place(scratch: str, target: str) -> None:
    """``scratch`` renamed to ``target``; what was there renamed aside first, then deleted
    (a link among it is deleted itself, never what it points to)."""
    if not os.path.lexists(target):
        os.rename(scratch, target)
        return
    parent, name = os.path.split(os.path.abspath(target))
    aside = tempfile.mkdtemp(dir=parent, prefix=f".{name}.replaced-")
    os.rename(target, os.path.join(aside, name))
    try:
        os.rename(scratch, target)
    except OSError:
        os.rename(os.path.join(aside, name), target)  # put back: the old export stays whole
        os.rmdir(aside)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _write_remote(target: str, tables: dict[str, bytes]) -> None:
    """A bucket renames nothing: each table is put whole (one put), then the earlier
    export's other objects are deleted, so the folder holds this export only."""
    before = fs.files_below(target)
    written = set()
    for table, data in tables.items():
        key = f"{table}/{table}.parquet"
        fs.write_bytes(posixpath.join(target.rstrip("/"), key), data)
        written.add(key)
    for key in before:
        if key not in written:
            with contextlib.suppress(FileNotFoundError):
                fs.remove(posixpath.join(target.rstrip("/"), key))
