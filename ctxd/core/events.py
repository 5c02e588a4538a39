"""The values the agents' adapters hand to the core, and the reply the core hands back.

An agent package turns its hook payloads into `HookEvent`s, its transcript lines into
`UsageUpdate`s and (Claude Code) its statusline payload into a `StatuslineReport`; the core
answers with a `Reply`, which the agent package renders as the exact JSON that agent expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["EventKind", "HookEvent", "PromptCache", "Reply", "StatuslineReport", "UsageUpdate"]

EventKind = Literal[
    "tool_call",
    "prompt",
    "stop",
    "compaction",
    "session_start",
    "session_end",
    "subagent_stop",
    "model_switch",  # the user (or the agent) is about to switch the session's model
    "model_switched",  # ...and has switched it
    "other",
]


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook invocation, as far as ctxd cares about it."""

    #: The agent's name in the agent registry.
    agent: str
    #: The agent's own event name (e.g. "PostToolUse", "AfterTool"), echoed back in replies.
    name: str
    kind: EventKind
    #: A plain token (`[A-Za-z0-9._-]`, 1..128 characters); safe as a key, never a path.
    session_id: str
    transcript_path: str | None
    cwd: str | None
    #: True only when the payload says so: the agent is already continuing because a Stop
    #: (AfterAgent) hook blocked; blocking again would loop.
    stop_hook_active: bool = False
    #: SessionStart `source`, PreCompact/PostCompact/PreCompress `trigger`, SessionEnd `reason`.
    source: str | None = None
    #: The model the payload names (Codex CLI on most events, Claude Code on SessionStart).
    model: str | None = None
    #: The subagent the event comes from (Claude Code SubagentStop; any event that carries it).
    #: A plain token like `session_id`, or None.
    agent_id: str | None = None
    #: The subagent's own transcript (Claude Code SubagentStop).
    agent_transcript_path: str | None = None
    #: The tool call a PostToolUse answers (a plain token, or None).
    tool_use_id: str | None = None
    #: The model a model switch goes to (Claude Code's PreModelSwitch/PostModelSwitch).
    to_model: str | None = None
    #: The context tokens the agent itself states (model switches, a resumed SessionStart).
    context_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """What ctxd wants to tell the agent; the agent's renderer drops what the event cannot carry.

    Empty or whitespace-only strings count as "nothing to say".
    """

    #: Text for the model's context (`additionalContext`).
    context: str | None = None
    #: Text shown to the user only (`systemMessage`).
    user_message: str | None = None
    #: Make the agent continue with this reason (Stop / AfterAgent); never sent when the event
    #: has `stop_hook_active`.
    block_reason: str | None = None
    #: Refuse what the event is about to do, with this reason (a model switch).
    deny_reason: str | None = None


@dataclass(frozen=True, slots=True)
class UsageUpdate:
    """The session's context usage as of one transcript record.

    `tokens` is the context size the agent will send next (what its own "context used" shows),
    by the agent's own formula (see each agent's transcript reader).
    """

    tokens: int
    #: Seconds since the epoch, from the record's own timestamp (None when it has none).
    at: float | None = None
    #: The model that reported this usage, as the transcript names it.
    model: str | None = None
    #: A window the transcript itself reports (Codex CLI's `model_context_window`).
    reported_window: int | None = None
    #: The window the agent's own model catalog gives the model that answered (pi's, by the
    #: answer's provider and model): the agent's figure, but no report of this session's, so
    #: what the session holds may raise it. None where the reader knows of no catalog entry;
    #: a reader that sets it stamps it on each of its updates.
    catalog_window: int | None = None
    #: True when this record is a compaction. `tokens` is then the post-compaction figure.
    compaction: bool = False
    #: Identity of the model turn (message id / response id); a later update with the same
    #: turn id replaces the earlier one (streamed duplicates, re-appended records).
    turn_id: str | None = None
    #: Tokens the agent counts towards its compaction point on top of `tokens` (Claude Code:
    #: the response's output tokens, which its next request carries as input). Readers of agents
    #: whose count is `tokens` alone leave it 0.
    pending: int = 0
    #: True when `tokens` is ctxd's estimate, not a figure the agent reported (a compaction
    #: whose record states no size: the summary's length stands in until the next response).
    estimated: bool = False
    #: For an automatic compaction: the size the agent compacted at, when its record says
    #: (Claude Code's `preTokens`); a clue to the window when nothing else states it.
    compacted_from: int | None = None
    #: The version of the agent that wrote the record, when it says (Claude Code's "2.1.332"):
    #: where the versions' compaction rules differ, the rule needs it.
    agent_version: str | None = None


@dataclass(frozen=True, slots=True)
class PromptCache:
    """The agent's prompt cache as the agent itself reports it (Claude Code's statusline
    `prompt_cache`): what decides whether and when it compacts an idle session."""

    #: Seconds the cache lives after the last request (3600 for "1h", 300 for "5m").
    ttl: int
    #: When it expires, epoch seconds; None when the agent does not say.
    expires_at: float | None
    warm: bool


@dataclass(frozen=True, slots=True)
class StatuslineReport:
    """The figures an agent itself reports about a session (Claude Code's statusline payload);
    authoritative over anything derived from the transcript."""

    session_id: str
    transcript_path: str | None
    cwd: str | None
    model_id: str | None
    model_name: str | None
    #: The context window size; None when absent (before the first reply).
    window: int | None
    #: Used percentage of the window; None before the first reply.
    used_pct: float | None
    #: Context tokens (output excluded); None before the first reply.
    tokens: int | None
    #: The agent's version ("2.1.332"), when the payload says.
    agent_version: str | None = None
    #: The prompt cache, when the payload says (after the first request).
    prompt_cache: PromptCache | None = None
    #: The window the agent's automatic compaction counts against, when its report reveals it
    #: (Claude Code 2.1.336+: its percentage is of that window, not of `window`).
    compact_window: int | None = None
