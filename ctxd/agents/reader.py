"""The interface of an incremental transcript reader, which every agent package implements.

A reader is fed the bytes appended to a transcript, split anywhere; it carries a partial last
line over to the next `feed` (`ctxd.agents.lines`) and never holds more than the current line.
It makes ONE pass over the lines for two listeners: it returns a `UsageUpdate` whenever the
session's context usage changes, and it hands every record it decodes to its `FactListener`
(the session digest, `ctxd.agents.digest`). A listener that wants no records (`NO_FACTS`, what
`ctxd replay` passes) lets the reader skip lines that cannot carry usage without decoding them;
one that wants them has every line decoded once, for both. A caller that wants the listener's
facts alone (`ctxd handoff`, which reads a whole file for its digest) opens the reader with
`usage=False`: a reader that keeps a digest then does no usage work at all (its `feed` returns
no updates), and only the listener's.

`JsonlReader` is that pass for a transcript of one JSON record a line, which an agent's reader
extends with what one record means (`_take`) and what it forgets on a reset (`_forget`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from ctxd.agents.lines import Changes, LineSplitter, decode
from ctxd.core.events import UsageUpdate

__all__ = [
    "NO_FACTS",
    "FactListener",
    "JsonlReader",
    "NoFacts",
    "OpenReader",
    "TranscriptReader",
]


class FactListener(Protocol):
    """What a reader tells besides usage: the transcript's records, in the file's order."""

    @property
    def wants_records(self) -> bool:
        """Whether `take` does anything: the reader decodes every line only for one that does."""
        ...

    def take(self, record: dict[str, Any]) -> None:
        """One decoded line of the transcript (of the reader's chain: a subagent's lines inside
        a session's transcript are not the session's)."""
        ...

    def flush(self) -> None:
        """The end of one `feed`: whatever waited for the rest of the bytes can be folded."""
        ...

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        ...


class NoFacts:
    """The listener that takes nothing (usage alone)."""

    __slots__ = ()

    wants_records = False

    def take(self, record: dict[str, Any]) -> None:
        pass

    def flush(self) -> None:
        pass

    def reset(self) -> None:
        pass


NO_FACTS: FactListener = NoFacts()


class TranscriptReader(Protocol):
    """Feeds on appended bytes; see the module docstring."""

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed (and
        hand the records decoded on the way to the listener, then `flush` it)."""
        ...

    def reset(self) -> None:
        """Forget everything (the listener too): the file was truncated or replaced and is
        read again from 0."""
        ...

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the transcript already holds the model turn that made tool call
        `tool_use_id`. An agent that writes the turn before it runs the tool answers True."""
        ...

    def saw_answer(self) -> bool:
        """Whether the transcript already holds the answer that ended the model's turn (what a
        Stop hook is judged on). An agent that writes it before its Stop hooks answers True."""
        ...


class OpenReader(Protocol):
    """An agent's reader factory: a fresh reader for the transcript at `path` (None: path
    unknown), reporting its facts to `facts`. With `usage=False` the caller wants only the
    facts: the reader may skip its usage work, and what its `feed` returns is not looked at (a
    reader that keeps no digest has no other work, and ignores it)."""

    def __call__(
        self, path: str | None, facts: FactListener = NO_FACTS, /, *, usage: bool = True
    ) -> TranscriptReader: ...


class JsonlReader:
    """The one pass over a JSONL transcript (one record a line, appended in order) that a
    reader subclasses: lines split across feeds, a crash's hole cut off, the bulk skipped
    undecoded when no listener wants it, each record decoded once for both the usage
    (`_take`) and the listener, and a figure reported only when it changed.

    A raw NUL byte is never part of a JSON line, so a line holding one is a crash's hole: the
    record after the last NUL is read, what comes before it is dropped.
    """

    #: Line starts that carry nothing the figures need, in the form the agent writes them: not
    #: decoded unless the listener wants every record (a line in another form is decoded; only
    #: the cost differs).
    bulk: ClassVar[tuple[bytes, ...]] = ()

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        self.facts = facts
        self._lines = LineSplitter()
        self._reported = Changes()

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed (and
        hand every record decoded to the listener, then flush it)."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        bulk = self.bulk
        for line in self._lines.feed(data):
            if not line:
                continue
            hole = line.rfind(b"\0")
            if hole >= 0:
                line = line[hole + 1 :]
            if not wants_records and line.startswith(bulk):
                continue
            record = decode(line)
            if record is None:
                continue
            update = self._take(record)
            if update is not None and self._reported.is_new(
                (update.tokens, update.pending, update.turn_id), force=update.compaction
            ):
                updates.append(update)
            if wants_records:
                facts.take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything (the listener too): the file was truncated or replaced and is
        read again from 0."""
        self._lines.reset()
        self._reported.reset()
        self._forget()
        self.facts.reset()

    def _take(self, record: dict[str, Any]) -> UsageUpdate | None:
        """What one decoded record changes: the figure it makes, if any."""
        raise NotImplementedError

    def _forget(self) -> None:
        """Drop the subclass's own state (its part of `reset`)."""
