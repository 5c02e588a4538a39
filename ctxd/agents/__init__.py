"""Per-agent adapters: a hook payload becomes a `HookEvent`; a `Reply` becomes the exact bytes
that agent accepts on the hook's stdout.

Pure functions, no I/O. Claude Code, Gemini CLI and Codex CLI share one payload shape
(`session_id`, `transcript_path`, `cwd`, `hook_event_name`, plus per-event fields), so parsing
the common fields lives here and each agent module only knows its own event names and its own
output envelope (`ctxd.agents.claude`, `.gemini`, `.codex`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from ctxd.agents import claude, codex, gemini
from ctxd.agents.dialect import EventKind as EventKind  # re-exported: part of this API
from ctxd.errors import InvalidInput
from ctxd.transcript import Agent

#: The largest payload `parse_hook` accepts. Agents cap what a tool returns to the model far
#: below this (Claude Code truncates Bash output at 30,000 characters), so anything bigger is
#: not a hook payload.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

# An id that may end up in a file name, a dict key or a log line: a plain token, never a path.
_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Event names are echoed back to the agent in `hookEventName`, so only identifiers pass.
_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook invocation, as far as ctxd cares about it."""

    agent: Agent
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


@dataclass(frozen=True, slots=True)
class Reply:
    """What ctxd wants to tell the agent; `render_reply` drops what the event cannot carry.

    Empty or whitespace-only strings count as "nothing to say".
    """

    #: Text for the model's context (`additionalContext`).
    context: str | None = None
    #: Text shown to the user only (`systemMessage`).
    user_message: str | None = None
    #: Make the agent continue with this reason (Stop / AfterAgent); never sent when the event
    #: has `stop_hook_active`.
    block_reason: str | None = None


def parse_hook(agent: Agent, payload: bytes, event_hint: str | None = None) -> HookEvent:
    """Parse a hook's raw stdin bytes into a `HookEvent`.

    `event_hint` is the event name given on the hook's command line; it is used only when the
    payload has no `hook_event_name`. Raises `InvalidInput` with a one-line reason when the
    payload is not a JSON object, names no usable event, or lacks a plain-token `session_id`.
    """
    data = _load_object(payload)
    name = _event_name(data.get("hook_event_name"), event_hint)
    session_id = data.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("hook payload has no session_id")
    if not _TOKEN.fullmatch(session_id):
        raise InvalidInput("hook payload session_id is not a plain token")
    source = _text(data.get("source")) or _text(data.get("trigger")) or _text(data.get("reason"))
    agent_id = _text(data.get("agent_id"))
    tool_use_id = _text(data.get("tool_use_id"))
    return HookEvent(
        agent=agent,
        name=name,
        kind=_DIALECTS[agent].event_kind(name, source),
        session_id=session_id,
        transcript_path=_path(data.get("transcript_path")),
        cwd=_path(data.get("cwd")),
        stop_hook_active=data.get("stop_hook_active") is True,
        source=source,
        model=_text(data.get("model")),
        agent_id=agent_id if agent_id is not None and _TOKEN.fullmatch(agent_id) else None,
        agent_transcript_path=_path(data.get("agent_transcript_path")),
        tool_use_id=tool_use_id
        if tool_use_id is not None and _TOKEN.fullmatch(tool_use_id)
        else None,
    )


def render_reply(event: HookEvent, reply: Reply) -> bytes:
    """The exact stdout bytes for `event`'s agent, or b"" when nothing is due.

    Context goes only to events whose context that agent feeds to the model; a block only to
    Stop (Claude Code, Codex CLI) or AfterAgent (Gemini CLI), and never when
    `event.stop_hook_active`; the user message only where that agent shows it. Every envelope
    names the event it answers.
    """
    wanted = Reply(
        context=_said(reply.context),
        user_message=_said(reply.user_message),
        block_reason=None if event.stop_hook_active else _said(reply.block_reason),
    )
    answer = _DIALECTS[event.agent].render(event.name, wanted)
    return orjson.dumps(answer) if answer else b""


_DIALECTS = {"claude": claude.DIALECT, "gemini": gemini.DIALECT, "codex": codex.DIALECT}


def _load_object(payload: bytes) -> dict[str, object]:
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(f"hook payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise InvalidInput("hook payload is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidInput("hook payload is not a JSON object")
    return data


def _event_name(named: object, hint: str | None) -> str:
    name = named if isinstance(named, str) and named else hint
    if not name:
        raise InvalidInput("hook payload names no event (no hook_event_name, no event argument)")
    if not _EVENT_NAME.fullmatch(name):
        raise InvalidInput("hook event name is not a plain identifier")
    return name


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _path(value: object) -> str | None:
    # A NUL byte cannot be in a real path; such a value is treated as absent, not trusted.
    text = _text(value)
    return text if text is not None and "\x00" not in text else None


def _said(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None
