"""What every agent's session digest shares: `Facts`, the listener of its transcript reader.

An agent's `Facts` subclass keeps a session's `Digest` (`ctxd.core.digest`) up to date from the
records its usage reader decodes (`ctxd.agents.reader`: one pass over the lines for both): the
facts of each record that can hold one (a request, a tool call, a tool's result, a todo list, a
compaction) are folded into the session's `DigestBook`. It is plain code over decoded records;
requests, of which only the newest can show, may wait for the end of the feed (`flush`,
`Facts.fold_requests`). Everything a `Facts` holds is bounded: the digest, and the tool calls
whose result has not come yet.

`daemon/files.py` opens an agent's facts (`AgentSpec.open_facts`) and gives them to the reader
it opens; `ctxd handoff` does the same for a file read once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

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
    "DigestSource",
    "Facts",
    "PendingCalls",
    "first_line",
    "last_line",
    "text_of",
    "todo_status",
    "todos_from",
]

T = TypeVar("T")

#: How many tool calls awaiting their result a reader remembers.
PENDING_KEPT = 16


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


class DigestSource(Protocol):
    """What the daemon asks of a session's digest: the digest, and (on every hook, so it must
    be cheap) how many compactions it has seen. A `Facts`, or a session store's digest read
    from the database when asked."""

    @property
    def digest(self) -> Digest: ...

    @property
    def compactions(self) -> int: ...


class Facts:
    """A session digest as its transcript reader's `FactListener`: the digest so far and the
    calls awaiting their result. An agent's subclass says what a record means (`take`)."""

    __slots__ = ("book", "limits", "pending")

    wants_records = True
    #: A failed command shows as fixed once a later run of it succeeds (`DigestBook`).
    mark_fixed = False

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        #: The digest being kept; an agent's facts fold into it directly where it is hot.
        self.book = DigestBook(limits, mark_fixed=self.mark_fixed)
        self.pending = PendingCalls()

    @property
    def digest(self) -> Digest:
        return self.book.digest

    @property
    def compactions(self) -> int:
        """`digest.compactions`, without building the digest (asked on every hook)."""
        return self.book.compactions

    def take(self, record: dict[str, Any]) -> None:
        """One decoded record of the transcript: its facts folded into the book."""
        raise NotImplementedError

    def flush(self) -> None:
        """The end of a feed: what waited for it (requests) is folded."""

    def fold(self, events: Iterable[DigestEvent]) -> None:
        add = self.book.add
        for event in events:
            add(event)

    def reset(self) -> None:
        self.book = DigestBook(self.limits, mark_fixed=self.mark_fixed)
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

    def fold_reply(self, taken: Sequence[str]) -> None:
        """Fold in the newest reply among `taken` (a feed's replies, oldest first) that says
        something: only the newest can show, so the others are never clipped."""
        for text in reversed(taken):
            if text.strip():
                self.book.reply(text)
                return


def todos_from(items: object, text_keys: tuple[str, ...]) -> tuple[Todo, ...]:
    """A todo list as the agents write it (a list of objects with a text under one of
    `text_keys` and a status) -> Todos."""
    if not isinstance(items, list):
        return ()
    out: list[Todo] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        text = ""
        for k in text_keys:  # the first that is a string
            value = item.get(k)
            if isinstance(value, str):
                text = value
                break
        if text:
            key = item.get("id")
            out.append(
                Todo(text, todo_status(item.get("status")), key if isinstance(key, str) else None)
            )
    return tuple(out)


def text_of(content: object) -> str:
    """A message's text: the string itself, or the `{"type": "text", "text"}` blocks of a
    list joined by newlines (the agents' common shape); "" for anything else."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(
        p["text"]
        for p in content
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    )


def first_line(text: str) -> str:
    """The first line of `text` that is not blank, stripped (what a failed tool says first)."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def last_line(text: str) -> str:
    """The last line of `text` that is not blank, stripped (a failing command says why at the
    end of what it printed); `text` can be long, and only its end is split."""
    text = text.rstrip()  # every line separator is whitespace too
    lines = text[text.rfind("\n") + 1 :].splitlines()
    return lines[-1].strip() if lines else ""
