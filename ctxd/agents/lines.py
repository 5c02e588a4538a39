"""The line layer shared by every reader: appended bytes -> complete JSONL lines.

`LineSplitter` is fed a file's bytes split anywhere and returns the complete lines, carrying a
partial last line over to the next `feed`. It holds nothing but that partial line. `decode` and
`epoch_seconds` turn one line, and the timestamp inside it, into values without ever raising:
a transcript is foreign input, and one bad line must not stop a reader. `Changes` lets a reader
report a figure only when it differs from the last one reported.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import orjson

__all__ = ["Changes", "LineSplitter", "count", "decode", "epoch_seconds", "leading_members"]

#: A partial line longer than this is dropped up to its newline. No agent writes such lines;
#: the cap keeps a runaway or binary file from growing the carry-over without bound.
DEFAULT_MAX_LINE = 64 * 1024 * 1024


class LineSplitter:
    """Bytes split anywhere -> complete lines, without their newline.

    Lines come out in file order, exactly as `data.split(b"\\n")` would give them for the whole
    file minus its unterminated tail. Empty lines are returned too; callers skip them. A line
    longer than `max_line` bytes is dropped whole (it is not split into pieces).
    """

    __slots__ = ("_carry", "_discarding", "max_line")

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._carry = bytearray()
        self._discarding = False

    @property
    def pending(self) -> int:
        """Bytes held for the partial last line (0 after a newline-terminated chunk)."""
        return len(self._carry)

    def feed(self, data: bytes) -> list[bytes]:
        """Consume the next bytes; return the lines they completed."""
        if b"\n" not in data:
            self._extend(data)
            return []
        # One split over the whole chunk is the fast path: C-speed scanning and one copy.
        lines = data.split(b"\n")
        tail = lines.pop()
        if self._discarding:
            # The first piece ends an overlong line that was already given up on.
            lines.pop(0)
            self._discarding = False
        elif self._carry:
            first = b"".join((self._carry, lines[0]))
            if len(first) > self.max_line:
                lines.pop(0)
            else:
                lines[0] = first
        self._carry = bytearray()
        self._extend(tail)
        return lines

    def reset(self) -> None:
        """Forget the partial line (the file was truncated or replaced)."""
        self._carry = bytearray()
        self._discarding = False

    def _extend(self, data: bytes) -> None:
        if self._discarding or not data:
            return
        if len(self._carry) + len(data) > self.max_line:
            self._carry = bytearray()
            self._discarding = True
            return
        self._carry += data


def decode(line: bytes) -> dict[str, Any] | None:
    """The JSON object on `line`, or None for blank lines, garbage, and non-objects."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_BLANKS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def leading_members(head: bytes) -> dict[str, Any] | None:
    """The members a JSON object spread over lines begins with, as far as `head` holds them
    whole; None when `head` is not the start of such an object.

    A recording written as one indented object (`{` alone on its first line) has no line that
    decodes on its own, and its head may end anywhere inside it: the members before the first
    one `head` cuts (`{"sessionId": ..., "projectHash": ..., "messages": [...` gives the first
    two) say whose it is.
    """
    text = head.decode("utf-8", "replace")
    at = _skip(text, 0)
    line_end = text.find("\n", at)
    if (text[at:] if line_end < 0 else text[at:line_end]).strip() != "{":
        return None
    members: dict[str, Any] = {}
    at = _skip(text, at + 1)
    while text.startswith('"', at):
        try:
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if not text.startswith(":", at):
                break
            value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
        except ValueError:
            break  # cut by the end of `head` (or not JSON): the members before it stand
        members[key] = value
        at = _skip(text, at)
        if not text.startswith(",", at):
            break
        at = _skip(text, at + 1)
    return members


def _skip(text: str, at: int) -> int:
    """The index of the first character at or after `at` that is not JSON whitespace."""
    blanks = _BLANKS.match(text, at)
    return blanks.end() if blanks else at


def epoch_seconds(value: object) -> float | None:
    """An ISO 8601 timestamp (`2026-11-29T20:37:11.416Z`) as seconds since the epoch, else None.

    A timestamp without an offset is taken as UTC, which is what the agents write.
    """
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def count(value: object) -> int | None:
    """A token count from JSON: a non-negative int (bools and floats are not counts), else None."""
    if type(value) is int and value >= 0:
        return value
    return None


class Changes:
    """Remembers the last figure a reader reported, so that repeats (streamed copies of one
    turn, a record re-appended unchanged) are not reported again."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: object = None

    def is_new(self, key: object, force: bool = False) -> bool:
        """Whether `key` differs from the last one seen (or `force`); remembers it if so."""
        if not force and key == self._last:
            return False
        self._last = key
        return True

    def reset(self) -> None:
        self._last = None
