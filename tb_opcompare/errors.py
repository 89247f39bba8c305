"""The one error type readers raise for input they cannot use, and how text from a
user's files is made safe to show in a message."""

from __future__ import annotations

# C0 and C1 control characters as \xNN: a terminal would act on them (clear the screen,
# forge a line), and a message quotes names and text from files.
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}


def escape_control_characters(text: str) -> str:
    return text.translate(_CONTROL)


class ProfileError(Exception):
    """A profile file that cannot be read, and why.

    Readers raise only this for bad input, so callers (CLI, HTTP routes) can show
    ``path`` and ``reason`` to the user instead of a traceback.
    """

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class OverLimit(ProfileError):
    """A read stopped by a limit of this process (the memory guard), not by the file:
    never cached, so a higher limit reads the file next time."""
