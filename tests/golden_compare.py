"""Compare a golden output with a produced one by meaning, not by bytes.

A number's last digits move with the BLAS kernel, the CPU and the numpy or pandas
release, and none of that is a change a user could see. So the golden tier compares:

- structure, keys, their order, texts, booleans and a number's kind (integer or not) exactly;
- numbers to a relative tolerance of ``REL`` (``ABS`` near zero), in JSON values, in CSV
  cells and in the numbers printed inside text (a CLI table, a warning, a headline);
- the bytes themselves only where bytes are the contract: each output's status line (the
  HTTP status and the CSV's ``Content-Disposition``) and a CSV's header row.

``differences`` returns one line per difference, naming the field and both values.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

REL = 1e-9
ABS = 1e-12  # µs, bytes and ratios alike: below a picosecond nothing is measured

# A number as the outputs print it: 12, -0.5, 1,234,567 (thousands), 1.5e-07, 13.639064306679616
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,])|(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_MAX_REPORTED = 20


def close(committed: float, produced: float) -> bool:
    if math.isnan(committed) or math.isnan(produced):
        return math.isnan(committed) and math.isnan(produced)
    return math.isclose(committed, produced, rel_tol=REL, abs_tol=ABS)


def differences(name: str, committed: bytes, produced: bytes) -> list[str]:
    """Every meaningful difference between two outputs called ``name`` (its extension
    says how to read the body), each as ``where: committed X, produced Y``."""
    found: list[str] = []
    committed_status, _, committed_body = committed.partition(b"\n")
    produced_status, _, produced_body = produced.partition(b"\n")
    if committed_status != produced_status:
        found.append(f"status line: committed {committed_status!r}, produced {produced_status!r}")
    if name.endswith(".json"):
        try:
            committed_doc, produced_doc = json.loads(committed_body), json.loads(produced_body)
        except ValueError:  # an error body that is not JSON: compare it as text
            _compare_text("body", committed_body.decode(), produced_body.decode(), found)
        else:
            _compare_json("$", committed_doc, produced_doc, found)
    elif name.endswith(".csv"):
        _compare_csv(committed_body.decode(), produced_body.decode(), found)
    else:
        # the CLI's text: "exit N" is the status line, then stdout and stderr
        for number, (old, new) in enumerate(_zip_lines(committed_body.decode(), produced_body.decode(), found), 2):
            _compare_text(f"line {number}", old, new, found)
    return found


def _zip_lines(committed: str, produced: str, found: list[str]) -> list[tuple[str, str]]:
    old, new = committed.splitlines(), produced.splitlines()
    if len(old) != len(new):
        found.append(f"line count: committed {len(old)}, produced {len(new)}")
    return list(zip(old, new))


def _compare_json(where: str, committed, produced, found: list[str]) -> None:
    if len(found) >= _MAX_REPORTED:
        return
    if isinstance(committed, dict) and isinstance(produced, dict):
        if list(committed) != list(produced):
            found.append(f"{where}: keys committed {list(committed)}, produced {list(produced)}")
            return
        for key in committed:
            _compare_json(f"{where}.{key}", committed[key], produced[key], found)
    elif isinstance(committed, list) and isinstance(produced, list):
        if len(committed) != len(produced):
            found.append(f"{where}: {len(committed)} items committed, {len(produced)} produced")
            return
        for index, (old, new) in enumerate(zip(committed, produced)):
            _compare_json(f"{where}[{index}]", old, new, found)
    elif _is_number(committed) and _is_number(produced):
        if type(committed) is not type(produced) or not close(float(committed), float(produced)):
            found.append(f"{where}: committed {committed!r}, produced {produced!r}")
    elif isinstance(committed, str) and isinstance(produced, str):
        _compare_text(where, committed, produced, found)
    elif committed != produced or type(committed) is not type(produced):
        found.append(f"{where}: committed {committed!r}, produced {produced!r}")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _compare_csv(committed: str, produced: str, found: list[str]) -> None:
    committed_header, _, _ = committed.partition("\n")
    produced_header, _, _ = produced.partition("\n")
    if committed_header != produced_header:  # the header's bytes are the contract
        found.append(f"CSV header: committed {committed_header!r}, produced {produced_header!r}")
        return
    old_rows = list(csv.reader(io.StringIO(committed)))
    new_rows = list(csv.reader(io.StringIO(produced)))
    if len(old_rows) != len(new_rows):
        found.append(f"CSV rows: committed {len(old_rows)}, produced {len(new_rows)}")
        return
    header = old_rows[0] if old_rows else []
    for number, (old, new) in enumerate(zip(old_rows[1:], new_rows[1:]), 2):
        if len(old) != len(new):
            found.append(f"CSV row {number}: committed {len(old)} cells, produced {len(new)}")
            continue
        for column, (old_cell, new_cell) in enumerate(zip(old, new)):
            label = header[column] if column < len(header) else f"column {column + 1}"
            _compare_text(f"CSV row {number}, {label}", old_cell, new_cell, found)


def _compare_text(where: str, committed: str, produced: str, found: list[str]) -> None:
    """Text equal but for the numbers in it, which are equal within the tolerance."""
    if committed == produced:
        return
    old_numbers, new_numbers = _NUMBER.findall(committed), _NUMBER.findall(produced)
    if _NUMBER.split(committed) != _NUMBER.split(produced) or len(old_numbers) != len(new_numbers):
        found.append(f"{where}: committed {committed!r}, produced {produced!r}")
        return
    for old, new in zip(old_numbers, new_numbers):
        if not close(_parse(old), _parse(new)):
            found.append(f"{where}: committed {old} in {committed!r}, produced {new} in {produced!r}")
            return


def _parse(number: str) -> float:
    return float(number.replace(",", ""))
