"""The interface of a digest reader, and what every agent's digest reader shares.

A digest reader is fed the same appended bytes as the usage reader (`ctxd.agents.reader`), split
anywhere, and keeps the session's `Digest` (`ctxd.core.digest`) up to date: it turns each line
that can hold a fact (a request, a tool call, a tool's result, a todo list, a compaction) into
`DigestEvent`s and folds them in. It holds the partial last line, the digest (bounded) and a
bounded map of the tool calls whose result has not come yet; nothing else. Lines that cannot
hold a fact are skipped by a substring test before any JSON work, as the usage readers do.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ctxd.agents.lines import DEFAULT_MAX_LINE
from ctxd.core.digest import DEFAULT_LIMITS, Digest, DigestEvent, Limits, Todo, apply

__all__ = ["DigestReader", "LineDigestReader", "PendingCalls", "todo_status"]

#: How many tool calls awaiting their result a reader remembers.
PENDING_KEPT = 16


class DigestReader(Protocol):
    """Feeds on appended bytes; `digest` is the session's digest so far."""

    @property
    def digest(self) -> Digest: ...

    def feed(self, data: bytes) -> None:
        """Consume the next bytes of the file."""
        ...

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        ...


class PendingCalls:
    """Tool calls whose result is still to come: call id -> (tool, what it was about)."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[str, tuple[str, str]] = {}

    def add(self, call_id: str, tool: str, about: str) -> None:
        self._calls[call_id] = (tool, about)
        if len(self._calls) > PENDING_KEPT:
            del self._calls[next(iter(self._calls))]

    def pop(self, call_id: str) -> tuple[str, str] | None:
        return self._calls.pop(call_id, None)

    def clear(self) -> None:
        self._calls.clear()


def todo_status(value: object) -> str:
    """An agent's word for a todo's state, as the digest's ("pending", "in_progress",
    "completed")."""
    text = str(value or "").lower().replace("-", "_").replace(" ", "_")
    if text in ("completed", "complete", "done", "finished"):
        return "completed"
    if text in ("in_progress", "inprogress", "active", "running", "started"):
        return "in_progress"
    return "pending"


class LineDigestReader:
    """Lines in, events out: a subclass says which lines may hold a fact from their first bytes
    (`wanted`) and what such a line means (`on_line`).

    The digest must cost little next to the usage reader, which already reads every byte: the
    lines are found with a `memchr` walk (no split, no copy), and a line is looked at only in
    its first `window` bytes unless `wanted` says it may hold a fact. A partial last line is
    carried over only while it may be wanted (its head is judged as soon as it is there).
    """

    #: How many bytes of a line's head `wanted` looks at.
    window = 400
    #: Lines that begin with one of these hold no fact: skipped without calling `wanted` (the
    #: most common kinds of line; one C call instead of a Python one).
    skip: tuple[bytes, ...] = ()

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self._carry = bytearray()
        self._skipping = False  # the carried line was judged unwanted: drop it to its end
        self._digest = Digest()
        self.limits = limits
        self.pending = PendingCalls()

    @property
    def digest(self) -> Digest:
        return self._digest

    def wanted(self, data: bytes, start: int, end: int) -> bool:
        """Whether the line `data[start:end]` may hold a fact, judged from its head
        (`data[start:min(end, start + window)]`) and, for a complete line, its tail."""
        raise NotImplementedError

    def head_unwanted(self, head: bytes) -> bool:
        """Whether a line that begins with `head` (`window` bytes, the rest still to come)
        surely holds no fact; by default what `wanted` says of the head."""
        return not self.wanted(head, 0, len(head))

    def on_line(self, line: bytes) -> Iterable[DigestEvent]:
        """The facts one complete, wanted line holds."""
        raise NotImplementedError

    def feed(self, data: bytes) -> None:
        find = data.find
        start = 0
        if self._carry or self._skipping:
            newline = find(b"\n")
            if newline < 0:
                self._hold(data)
                return
            if not self._skipping:
                self._carry += data[:newline]
                line = bytes(self._carry)
                if self.wanted(line, 0, len(line)):
                    self.fold(self.on_line(line))
            self._carry = bytearray()
            self._skipping = False
            start = newline + 1
        wanted = self.wanted
        skip = data.startswith
        skipped = self.skip
        while (newline := find(b"\n", start)) >= 0:
            if newline > start and not skip(skipped, start) and wanted(data, start, newline):
                self.fold(self.on_line(data[start:newline]))
            start = newline + 1
        if start < len(data):
            self._hold(data[start:] if start else data)

    def _hold(self, tail: bytes) -> None:
        if self._skipping:
            return
        self._carry += tail
        size = len(self._carry)
        unwanted = size >= self.window and self.head_unwanted(bytes(self._carry[: self.window]))
        if unwanted or size > DEFAULT_MAX_LINE:  # (no agent writes such lines: a runaway file)
            self._carry = bytearray()
            self._skipping = True

    def fold(self, events: Iterable[DigestEvent]) -> None:
        digest = self._digest
        for event in events:
            digest = apply(digest, event, self.limits)
        self._digest = digest

    def reset(self) -> None:
        self._carry = bytearray()
        self._skipping = False
        self._digest = Digest()
        self.pending.clear()


def todos_from(items: object, text_keys: tuple[str, ...]) -> tuple[Todo, ...]:
    """A todo list as the agents write it (a list of objects with a text under one of
    `text_keys` and a status) -> Todos."""
    if not isinstance(items, list):
        return ()
    out: list[Todo] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        text = next((item[k] for k in text_keys if isinstance(item.get(k), str)), "")
        if text:
            key = item.get("id")
            out.append(
                Todo(text, todo_status(item.get("status")), key if isinstance(key, str) else None)
            )
    return tuple(out)
