"""The interface of a digest reader, and what every agent's digest reader shares.

A digest reader keeps a session's `Digest` (`ctxd.core.digest`) up to date from the bytes
appended to its transcript, split anywhere: the facts of each line that can hold one (a
request, a tool call, a tool's result, a todo list, a compaction) are folded into the session's
`DigestBook`. Requests, of which only the newest can show, wait for the end of the feed
(`Facts.fold_requests`).

It does not read the lines itself. The agent's usage reader (`ctxd.agents.<agent>.transcript`)
already splits every line and judges it from its first bytes; a second pass over the lines in
Python would cost more than the digest's own work (issue 14). So an agent's `Facts`
rides on its usage reader: the reader, given one, classifies each line once for both, decodes it
at most once, and hands the digest the records it decoded anyway and the few other lines that
may hold a fact. `UsageDigestReader` is the pair seen as a `DigestReader`; a caller that wants
usage too feeds only its `usage_reader` (`daemon/files.py`), a caller that wants the digest
alone (`ctxd handoff`) feeds it. Everything a `Facts` holds is bounded: the digest, and the tool
calls whose result has not come yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from ctxd.agents.reader import TranscriptReader
from ctxd.core.digest import (
    DEFAULT_LIMITS,
    Digest,
    DigestBook,
    DigestEvent,
    Limits,
    Todo,
    is_request,
)

__all__ = [
    "DigestReader",
    "Facts",
    "PendingCalls",
    "UsageDigestReader",
    "todo_status",
    "todos_from",
]

T = TypeVar("T")

#: How many tool calls awaiting their result a reader remembers.
PENDING_KEPT = 16


class DigestReader(Protocol):
    """Feeds on appended bytes; `digest` is the session's digest so far."""

    @property
    def digest(self) -> Digest: ...

    @property
    def compactions(self) -> int:
        """`digest.compactions`, without building the digest (asked on every hook)."""
        ...

    @property
    def usage_reader(self) -> TranscriptReader | None:
        """The usage reader this digest rides on: feeding that one keeps the digest up to date
        (and this one must then not be fed as well). None: the digest reads its own bytes."""
        ...

    def feed(self, data: bytes) -> None:
        """Consume the next bytes of the file."""
        ...

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        ...


class PendingCalls(dict[str, tuple[str, str]]):
    """Tool calls whose result is still to come: call id -> (tool, what it was about). A dict
    (its `pop(call_id, None)`, `in` and `clear` run in C: one of each per tool call), bounded
    by `add`."""

    __slots__ = ()

    def add(self, call_id: str, tool: str, about: str) -> None:
        self[call_id] = (tool, about)
        if len(self) > PENDING_KEPT:
            del self[next(iter(self))]


def todo_status(value: object) -> str:
    """An agent's word for a todo's state, as the digest's ("pending", "in_progress",
    "completed")."""
    known = _STATUS_WORDS.get(value) if isinstance(value, str) else None
    if known is not None:  # the agents' own words, without copying them
        return known
    text = str(value or "").lower().replace("-", "_").replace(" ", "_")
    if text in ("completed", "complete", "done", "finished"):
        return "completed"
    if text in ("in_progress", "inprogress", "active", "running", "started"):
        return "in_progress"
    return "pending"


#: The words the agents write (Claude Code, Gemini CLI, Codex CLI), as `todo_status` maps them.
_STATUS_WORDS = {"pending": "pending", "in_progress": "in_progress", "completed": "completed"}


class Facts:
    """The digest side of an agent's reader: the digest so far and the calls awaiting their
    result. An agent's subclass says what a line or a record means; its usage reader calls it."""

    __slots__ = ("book", "limits", "pending")

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        #: The digest being kept; an agent's facts fold into it directly where it is hot.
        self.book = DigestBook(limits)
        self.pending = PendingCalls()

    @property
    def digest(self) -> Digest:
        return self.book.digest

    def fold(self, events: Iterable[DigestEvent]) -> None:
        add = self.book.add
        for event in events:
            add(event)

    def reset(self) -> None:
        self.book = DigestBook(self.limits)
        self.pending.clear()

    def fold_requests(self, taken: Sequence[T], texts_of: Callable[[T], list[str]]) -> None:
        """Fold in the requests among `taken` (a feed's request lines, oldest first) that can
        show in the digest: the session's first, if the book has none yet, and the newest
        `Limits.asks`. `texts_of` reads one (its requests, oldest first); it is called only for
        those looked at, so the others are never decoded. The same digest as folding each."""
        cache: dict[int, list[str]] = {}

        def texts(i: int) -> list[str]:
            if i not in cache:
                cache[i] = [t for t in texts_of(taken[i]) if is_request(t)]
            return cache[i]

        chosen: list[tuple[int, int]] = []
        if self.book.first_ask is None:
            first = next((i for i in range(len(taken)) if texts(i)), None)
            if first is not None:
                chosen.append((first, 0))
        left = self.limits.asks
        for i in range(len(taken) - 1, -1, -1):
            if left == 0:
                break
            for j in range(len(texts(i)) - 1, -1, -1):
                if left == 0:
                    break
                left -= 1
                if (i, j) not in chosen:
                    chosen.append((i, j))
        for i, j in sorted(chosen):
            self.book.ask(cache[i][j])


class _Riding(TranscriptReader, Protocol):
    @property
    def facts(self) -> Facts | None: ...


class UsageDigestReader:
    """A usage reader with `Facts` attached, seen as a `DigestReader`: `feed` runs the usage
    reader's one pass (its updates dropped), `digest` is what the facts hold."""

    __slots__ = ("_facts", "_reader")

    def __init__(self, reader: _Riding) -> None:
        assert reader.facts is not None
        self._reader = reader
        self._facts = reader.facts

    @property
    def digest(self) -> Digest:
        return self._facts.digest

    @property
    def compactions(self) -> int:
        return self._facts.book.compactions

    @property
    def usage_reader(self) -> TranscriptReader:
        return self._reader

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    def reset(self) -> None:
        self._reader.reset()  # which resets the facts too


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
