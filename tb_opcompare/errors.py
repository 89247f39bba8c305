"""The error types: ``ProfileError`` for a file that cannot be read, ``UsageError`` for a
request the user got wrong; and how text from a user's files is made safe to show."""

from __future__ import annotations

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


def escape_control_characters(text: str) -> str:
    """``text`` with control, invisible and bidirectional characters shown as escapes."""
    return text.translate(_CONTROL)


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
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
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
