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

from ctxd.agents.lines import LineSplitter
from ctxd.core.digest import DEFAULT_LIMITS, Digest, DigestEvent, Limits, Todo, apply

__all__ = ["DigestReader", "LineDigestReader", "PendingCalls", "todo_status"]

#: How many tool calls awaiting their result a reader remembers.
PENDING_KEPT = 64


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
    """Lines in, events out: a subclass says what one line means (`on_line`)."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self._lines = LineSplitter()
        self._digest = Digest()
        self.limits = limits
        self.pending = PendingCalls()

    @property
    def digest(self) -> Digest:
        return self._digest

    def feed(self, data: bytes) -> None:
        for line in self._lines.feed(data):
            if line:
                self.fold(self.on_line(line))

    def fold(self, events: Iterable[DigestEvent]) -> None:
        digest = self._digest
        for event in events:
            digest = apply(digest, event, self.limits)
        self._digest = digest

    def reset(self) -> None:
        self._lines.reset()
        self._digest = Digest()
        self.pending.clear()

    def on_line(self, line: bytes) -> Iterable[DigestEvent]:
        """The facts one complete line holds (none for most lines)."""
        raise NotImplementedError


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
