"""Incremental transcript readers: bytes as the file grows -> usage updates.

One reader per agent format. A reader is fed the bytes appended to a transcript, split
anywhere; it carries a partial last line over to the next `feed`, skips lines that cannot carry
usage without decoding them, and never holds more than the current line. It emits a
`UsageUpdate` whenever the session's context usage changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Agent = Literal["claude", "gemini", "codex"]
AGENTS: tuple[Agent, ...] = ("claude", "gemini", "codex")


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """The session's context usage as of one transcript record.

    `tokens` is the context size the agent will send next (what its own "context used" shows):
    Claude Code input + cache_creation + cache_read of the last main-chain assistant message;
    Gemini CLI the latest gemini message's prompt tokens; Codex CLI the newest per-response usage.
    """

    tokens: int
    #: Seconds since the epoch, from the record's own timestamp (None when it has none).
    at: float | None = None
    #: The model that reported this usage, as the transcript names it.
    model: str | None = None
    #: A window the transcript itself reports (Codex CLI's `model_context_window`).
    reported_window: int | None = None
    #: True when this record is a compaction (Claude compact_boundary, Codex `compacted`,
    #: Gemini compression seen in the transcript). `tokens` is then the post-compaction figure.
    compaction: bool = False
    #: Identity of the model turn (message id / response id); a later update with the same
    #: turn id replaces the earlier one (streamed duplicates, re-appended Gemini records).
    turn_id: str | None = None


class TranscriptReader(Protocol):
    """Feeds on appended bytes; see the module docstring."""

    agent: Agent

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        ...

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        ...
