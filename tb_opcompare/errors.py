"""The one error type readers raise for input they cannot use."""

from __future__ import annotations


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
