"""The sidecar ``opcompare.json`` beside a run: what its recorder said about it (model,
batch size, device, label, repeat), written by ``tb_opcompare.recording`` and read here
with the run name's claims, in that order of trust."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import sys
from typing import TYPE_CHECKING

from tb_opcompare.ingest import fs
from tb_opcompare.ingest.naming import (
    batch_size_from_name,
    compiler_from_name,
    device_from_name,
    model_key,
    precision_from_name,
    repeat_from_name,
    without_dimensions,
)
from tb_opcompare.schema.dimensions import (
    MAX_BATCH_SIZE,
    canonical_compiler,
    canonical_precision,
    configuration_key,
    is_batch_size,
)

if TYPE_CHECKING:
    from tb_opcompare.ingest.discovery import RunSource

SIDECAR = "opcompare.json"
_SIDECAR_MAX_BYTES = 1 << 20
SIDECAR_SOURCE = SIDECAR
NAME_SOURCE = "run name"


_READ: dict[tuple, tuple[dict, str | None]] = {}  # (path, its fingerprint) -> what _read_sidecar found
_READ_KEPT = 4096


def _read_sidecar(source: RunSource) -> tuple[dict, str | None]:
    """The sidecar's JSON object and None, or ``{}`` and why it was ignored. Read once per
    version of the file (its size and time, or ETag, from the listing): every load of a
    run settles its facts with it, and in a bucket each read is a request."""
    if source.sidecar_listed is False:
        return {}, None
    path = fs.join(source.run_dir, SIDECAR)
    try:
        fingerprint = fs.fingerprint(path)
    except OSError:
        return _parse_sidecar(path, source.places)
    if not fingerprint["mtime"] and not fingerprint["etag"]:  # a store that tells no version: read each time
        return _parse_sidecar(path, source.places)
    key = (path, fingerprint["size"], fingerprint["mtime"], fingerprint["etag"], source.places)
    found = _READ.get(key)
    if found is None:
        if len(_READ) >= _READ_KEPT:
            _READ.clear()
        found = _READ[key] = _parse_sidecar(path, source.places)
    sidecar, warning = found
    return dict(sidecar), warning


def remember_sidecar(path: str, fingerprint: dict, data: bytes) -> None:
    """What the remote sidecar ``path`` of this version (``fs.fingerprint``'s, from the
    listing) holds, known without reading it: the shared index keeps a copy of each
    indexed run's sidecar, so listing an indexed bucket asks for no sidecar (one request a
    run). Its bytes are checked as a read's are (``_parsed_sidecar``)."""
    key = (path, fingerprint["size"], fingerprint["mtime"], fingerprint["etag"], None)
    if key not in _READ and len(_READ) < _READ_KEPT:
        _READ[key] = _parsed_sidecar(path, data)


def read_sidecars_ahead(sources: list[RunSource]) -> None:
    """The sidecars of a remote logdir's runs that are not known yet (the shared index's
    copies are), read at once (``fs.read_heads``): one after the other, a listing of 1,000
    runs in a bucket made a round trip a run for them."""
    wanted = {}
    for source in sources:
        if not source.sidecar_listed or not fs.is_remote(source.run_dir):
            continue
        path = fs.join(source.run_dir, SIDECAR)
        try:
            fingerprint = fs.fingerprint(path)
        except OSError:
            continue
        key = (path, fingerprint["size"], fingerprint["mtime"], fingerprint["etag"], None)
        if (fingerprint["mtime"] or fingerprint["etag"]) and key not in _READ:
            wanted[path] = fingerprint
    for path, data in fs.read_heads(list(wanted), _SIDECAR_MAX_BYTES + 1).items():
        remember_sidecar(path, wanted[path], data)


def _parse_sidecar(path: str, places: tuple[str, ...] | None) -> tuple[dict, str | None]:
    try:
        # the rule every file of a run is read by (``fs.confined``, checked on the open
        # descriptor): a sidecar linked out of the logdir put another file's fields (label,
        # model, device) in the runs document
        with fs.confined(places):
            data = fs.read_head(path, _SIDECAR_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}, None
    except OSError as error:
        return {}, f"{path}: ignored, {error.strerror or error}"
    return _parsed_sidecar(path, data)


def _parsed_sidecar(path: str, data: bytes) -> tuple[dict, str | None]:
    if len(data) > _SIDECAR_MAX_BYTES:
        return {}, f"{path}: ignored, larger than {_SIDECAR_MAX_BYTES:,} bytes (a sidecar is a few hundred)"
    try:
        sidecar = json.loads(data)
        if not isinstance(sidecar, dict):
            raise ValueError("expected a JSON object")
    except RecursionError:
        return {}, f"{path}: ignored, JSON nested too deeply"
    except ValueError as error:
        return {}, f"{path}: ignored, not a JSON object ({error})"
    return sidecar, None


def sidecar_field(source: RunSource, path: str) -> str | None:
    """A field of the run's sidecar by its dotted path (``versions.torch``), as text; None
    where the sidecar or the field is missing or the field is not a plain value."""
    value = _read_sidecar(source)[0]
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return None if isinstance(value, (dict, list)) or value is None else str(value)


def sidecar_object(source: RunSource, field: str) -> dict | None:
    """A JSON object of the run's sidecar (``device_limits``), as given; None where the
    sidecar or the field is missing or the field is no object. Its reader checks its
    values (``analysis.device_limits.from_sidecar``)."""
    value = _read_sidecar(source)[0].get(field)
    return value if isinstance(value, dict) else None


@dataclasses.dataclass(frozen=True)
class Claims:
    """What a run's sidecar and name say, before (or beside) what its data shows. The
    order of trust is data, then sidecar, then name."""

    # What runs are grouped by before their traces are read: ``configuration_key`` of
    # base_model and the claimed precision and compiler (a read run's key follows its data:
    # ``store.catalog``)
    model: str
    label: str | None
    batch_sizes: tuple[tuple[int, str], ...]  # (size, source), most trusted first
    device: str | None  # the sidecar's device, else the name's
    device_source: str | None
    device_name: str | None
    warning: str | None  # a sidecar that could not be used
    repeat: int | None = None  # which recording of one configuration (sidecar ``repeat``, else ``_rep<K>``)
    precision: str | None = None  # the sidecar's ``precision``, else the name's (fp32, bf16 ...)
    compiler: str | None = None  # the sidecar's ``compiler``, else the name's (eager, torch.compile, XLA ...)
    precision_source: str | None = None  # SIDECAR_SOURCE or NAME_SOURCE
    compiler_source: str | None = None
    base_model: str = ""  # the sidecar's ``model``, else the run name's model key; without precision and
    # compiler tokens (``resnet_bf16`` -> ``resnet``)
    model_source: str = "run name"  # ``sidecar`` where the sidecar gave ``model``


def read_claims(source: RunSource) -> Claims:
    sidecar, warning = _read_sidecar(source)
    model = sidecar.get("model") if isinstance(sidecar.get("model"), str) else None
    label = sidecar.get("label") if isinstance(sidecar.get("label"), str) else None
    sidecar_batch = sidecar.get("batch_size")
    batch_sizes: list[tuple[int, str]] = []
    if is_batch_size(sidecar_batch):
        batch_sizes.append((sidecar_batch, SIDECAR_SOURCE))
    elif sidecar_batch is not None and warning is None:
        warning = (
            f"{fs.join(source.run_dir, SIDECAR)}: batch_size {str(sidecar_batch)[:40]!r} ignored, not a "
            f"whole number from 1 to {MAX_BATCH_SIZE:,}"
        )
    named_batch = batch_size_from_name(source.run)
    if named_batch is not None:
        batch_sizes.append((named_batch, NAME_SOURCE))
    sidecar_device = sidecar.get("device")
    device: str | None
    device_source: str | None
    if isinstance(sidecar_device, str) and sidecar_device.strip():
        device, device_source = sidecar_device.strip().upper(), SIDECAR_SOURCE
    else:
        device = device_from_name(source.run)
        device_source = NAME_SOURCE if device else None
    device_name = sidecar.get("device_name") if isinstance(sidecar.get("device_name"), str) else None
    repeat = sidecar.get("repeat")
    if not (isinstance(repeat, int) and not isinstance(repeat, bool) and repeat > 0):
        repeat = repeat_from_name(source.run)
    precision, compiler = (_short_text(sidecar.get(field)) for field in ("precision", "compiler"))
    precision_source = SIDECAR_SOURCE if precision else None
    compiler_source = SIDECAR_SOURCE if compiler else None
    if not precision and (precision := precision_from_name(source.run) or precision_from_name(model or "")):
        precision_source = NAME_SOURCE if precision_from_name(source.run) else SIDECAR_SOURCE
    if not compiler and (compiler := compiler_from_name(source.run) or compiler_from_name(model or "")):
        compiler_source = NAME_SOURCE if compiler_from_name(source.run) else SIDECAR_SOURCE
    precision = canonical_precision(precision) if precision else None
    compiler = canonical_compiler(compiler) if compiler else None
    base_model = without_dimensions(model) if model else model_key(source.run)
    return Claims(
        model=configuration_key(base_model, precision, compiler),
        label=label,
        batch_sizes=tuple(batch_sizes),
        device=device,
        device_source=device_source,
        device_name=device_name,
        warning=warning,
        repeat=repeat,
        precision=precision,
        compiler=compiler,
        precision_source=precision_source,
        compiler_source=compiler_source,
        base_model=base_model,
        model_source="sidecar" if model else "run name",
    )


def _short_text(value) -> str | None:
    """A sidecar's free-text fact, if it is one: a string of at most 40 characters."""
    return value.strip() if isinstance(value, str) and 0 < len(value.strip()) <= 40 else None


def write_sidecar(
    run_dir: str,
    *,
    model: str | None,
    batch_size: int | None,
    device: str,
    device_name: str | None,
    framework: str,
    versions: dict[str, str],
    repeat: int | None = None,
    extra: dict | None = None,
) -> str:
    """Write ``opcompare.json``: what the profile itself may not say (model, declared
    batch size) and what helps later (versions, command line, host)."""
    os.makedirs(run_dir, exist_ok=True)
    sidecar = {
        "model": model,
        "batch_size": batch_size,
        "device": device,
        "device_name": device_name,
        "framework": framework,
        "versions": {"python": platform.python_version(), **versions},
        "command": [sys.executable, *sys.argv],
        "host": platform.node(),
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "repeat": repeat,
        **(extra or {}),
    }
    path = os.path.join(run_dir, SIDECAR)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({k: v for k, v in sidecar.items() if v is not None}, handle, indent=2)
    return path
