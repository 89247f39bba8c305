"""The error types: ``ProfileError`` for a file that cannot be read, ``UsageError`` for a
request the user got wrong; and how text from a user's files is made safe to show."""

from __future__ import annotations

import re

# C0 and C1 control characters as \xNN: a terminal would act on them (clear the screen,
# forge a line), and a message quotes names and text from files. Invisible and
# bidirectional controls as \uNNNN: a right-to-left override makes `cnn_gpu<U+202E>46sb`
# read as another run (`cnn_gpubs64`), a zero-width space hides that two names differ.
# frontend/format.js's visibleText is the same rule (tests/golden/text_cases.json).
INVISIBLE = (0x00AD, 0x061C, 0x180E, *range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0xFEFF)
_CONTROL = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))},
    **{code: f"\\u{code:04x}" for code in INVISIBLE},
}


CONTROL_CHARACTERS = tuple(_CONTROL)  # the code points ``escape_control_characters`` escapes


def escape_control_characters(text: str) -> str:
    """``text`` with control, invisible and bidirectional characters shown as escapes."""
    return text.translate(_CONTROL)


# A file name that is not UTF-8 comes from the file system as a string holding each byte
# that is not as a lone surrogate (Python's surrogateescape: 0xff is U+DCFF), which no JSON,
# Parquet or strict terminal can carry: one such folder ended `runs` in a traceback and the
# tab's listing in HTTP 500.
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def escape_undecodable(text: str) -> str:
    """``text`` with each byte that was not UTF-8 shown as ``\\xNN`` (another lone
    surrogate as ``\\uNNNN``): the name a run in a folder named so is listed and asked
    for by. ``text`` itself where it is UTF-8 (nearly always: one check)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return _SURROGATE.sub(_escaped_surrogate, text)


def _escaped_surrogate(found: re.Match) -> str:
    code = ord(found.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


class UsageError(ValueError):
    """A request the user got wrong (a parameter out of range, runs that cannot be compared
    that way), not a file that cannot be read: every service raises this one type, and
    the web answers it with 400 (``web.routes._answer_errors``), the CLI with exit code 2
    (``cli.main.main``). ``parameter``: the parameter at fault, where one is."""

    def __init__(self, message: str, parameter: str | None = None):
        super().__init__(message)
        self.parameter = parameter

    def __reduce__(self):
        return type(self), (str(self), self.parameter)


class UnknownRunError(KeyError):
    """A run or session name that is not among the discovered ones."""

    def __init__(self, message: str, known: list[str]):
        super().__init__(message)
        self.message = message
        self.known = known

    def __reduce__(self):  # pickled whole (a Dask task's error), not as its message alone
        return type(self), (self.message, self.known)


class ProfileError(Exception):
    """A profile file that cannot be read, and why.

    Readers raise only this for bad input, so callers (CLI, HTTP routes) can show
    ``path`` and ``reason`` to the user instead of a traceback.
    """

    def __init__(self, path: str, reason: str):
        # shown wherever it is said (a JSON document, a terminal): a path that is not UTF-8 escaped
        path, reason = escape_undecodable(str(path)), escape_undecodable(str(reason))
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self):  # pickled whole (a Dask task's result), not as its message alone
        return type(self), (self.path, self.reason)


class NotReadableNow(ProfileError):
    """A file this process could not open or read (a permission, an I/O error), not a
    broken file: never cached, so fixing the permission reads it at the next request
    (before, the refusal stood until the file itself changed)."""


class OverLimit(ProfileError):
    """A read stopped by a limit of this process (the memory guard), not by the file:
    never cached, so a higher limit reads the file next time."""
