"""The interface of an incremental transcript reader, which every agent package implements.

A reader is fed the bytes appended to a transcript, split anywhere; it carries a partial last
line over to the next `feed` (`ctxd.agents.lines`), skips lines that cannot carry usage without
decoding them, and never holds more than the current line. It emits a `UsageUpdate` whenever the
session's context usage changes.
"""

from __future__ import annotations

from typing import Protocol

from ctxd.core.events import UsageUpdate

__all__ = ["TranscriptReader"]


class TranscriptReader(Protocol):
    """Feeds on appended bytes; see the module docstring."""

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        ...

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        ...

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the transcript already holds the model turn that made tool call
        `tool_use_id`. An agent that writes the turn before it runs the tool answers True."""
        ...

    def saw_answer(self) -> bool:
        """Whether the transcript already holds the answer that ended the model's turn (what a
        Stop hook is judged on). An agent that writes it before its Stop hooks answers True."""
        ...
