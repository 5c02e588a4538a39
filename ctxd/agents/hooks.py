"""Hook payloads in, hook answers out: what every agent's hooks share.

Pure functions, no I/O. The agents ctxd serves share one payload shape (`session_id`,
`transcript_path`, `cwd`, `hook_event_name`, plus per-event fields), so parsing the common fields
lives here, and each agent package only states its own event names and output envelope as a
`Dialect` (`ctxd.agents.<agent>.hooks`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import orjson

from ctxd.agents.dialect import Dialect
from ctxd.core.events import HookEvent, Reply
from ctxd.errors import InvalidInput
from ctxd.untrusted import holdable_path

__all__ = ["MAX_PAYLOAD_BYTES", "PLAIN_TOKEN", "load_payload", "parse_hook", "render_reply"]

#: The largest payload `parse_hook` accepts. Agents cap what a tool returns to the model far
#: below this (Claude Code truncates Bash output at 30,000 characters), so anything bigger is
#: not a hook payload.
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024

# An id that may end up in a file name, a dict key or a log line: a plain token, never a path.
PLAIN_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,128}")
# Event names are echoed back to the agent in `hookEventName`, so only identifiers pass.
_EVENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def parse_hook(
    agent: str, dialect: Dialect, payload: bytes, event_hint: str | None = None
) -> HookEvent:
    """Parse a hook's raw stdin bytes into a `HookEvent`.

    `event_hint` is the event name given on the hook's command line; it is used only when the
    payload has no `hook_event_name`. Raises `InvalidInput` with a one-line reason when the
    payload is not a JSON object, names no usable event, or lacks a plain-token `session_id`.
    """
    data = load_payload(payload, keys=dialect.payload_keys)
    name = _event_name(data.get("hook_event_name"), event_hint)
    session_id = str(data["session_id"])
    source = _text(data.get("source")) or _text(data.get("trigger")) or _text(data.get("reason"))
    agent_id = _text(data.get("agent_id"))
    tool_use_id = _token(data.get("tool_use_id"))
    return HookEvent(
        agent=agent,
        name=name,
        kind=dialect.event_kind(name, source),
        session_id=session_id,
        transcript_path=_path(data.get("transcript_path")),
        cwd=_path(data.get("cwd")),
        stop_hook_active=data.get("stop_hook_active") is True,
        source=source,
        model=_text(data.get("model")),
        agent_id=agent_id if agent_id is not None and PLAIN_TOKEN.fullmatch(agent_id) else None,
        agent_transcript_path=_path(data.get("agent_transcript_path")),
        tool_use_id=tool_use_id
        if tool_use_id is not None and PLAIN_TOKEN.fullmatch(tool_use_id)
        else None,
        to_model=_text(data.get("to_model")),
        context_tokens=_count(data.get("context_tokens")),
    )


def _count(value: object) -> int | None:
    # bool is an int in Python; JSON true is not a token count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def goes_as_block(dialect: Dialect, event: HookEvent, reply: Reply) -> bool:
    """Whether `render_reply` answers `event` with a block (its reason, or the user message
    made one), which the agent, once it honoured it, echoes at its next stop."""
    if event.stop_hook_active or event.name not in dialect.block_events:
        return False
    if _said(reply.block_reason):
        return True
    return bool(_said(reply.user_message)) and event.name not in dialect.user_message_events


def render_reply(dialect: Dialect, event: HookEvent, reply: Reply) -> bytes:
    """The exact stdout bytes for `event`'s agent, or b"" when nothing is due.

    Context goes only to events whose context that agent feeds to the model; a block only to
    Stop (Claude Code, Codex CLI) or AfterAgent (Gemini CLI), and never when
    `event.stop_hook_active`; the user message only where that agent shows it (where it shows
    none on a Stop it can block, the message is the block's reason). Every envelope names the
    event it answers.
    """
    user_message = _said(reply.user_message)
    block_reason = None if event.stop_hook_active else _said(reply.block_reason)
    if (
        user_message
        and block_reason is None
        and not event.stop_hook_active
        and event.name in dialect.block_events
        and event.name not in dialect.user_message_events
    ):
        # The agent shows this event's messages to no one but lets it be blocked: the model
        # is the only reader there is, so the message (the handoff request) goes as the reason.
        block_reason, user_message = user_message, None
    wanted = Reply(
        context=_said(reply.context),
        user_message=user_message,
        block_reason=block_reason,
        deny_reason=_said(reply.deny_reason),
    )
    answer = dialect.render(event.name, wanted)
    return orjson.dumps(answer) if answer else b""


def load_payload(
    payload: bytes,
    what: str = "hook payload",
    limit: int = MAX_PAYLOAD_BYTES,
    keys: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A payload's JSON object with a plain-token `session_id`; InvalidInput naming `what`
    and the reason otherwise. `keys` maps an agent's own key (a dotted path for a nested one)
    to the shared one it stands for (`Dialect.payload_keys`); a shared key the payload has
    wins."""
    if len(payload) > limit:
        raise InvalidInput(f"{what} is larger than {limit} bytes")
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise InvalidInput(f"{what} is not JSON") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{what} is not a JSON object")
    for own, shared in (keys or {}).items():
        found, value = _member(data, own)
        if found and shared not in data:
            data[shared] = value
    session_id = data.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput(f"{what} has no session_id")
    if not PLAIN_TOKEN.fullmatch(session_id):
        raise InvalidInput(f"{what} session_id is not a plain token")
    return data


def _member(data: Mapping[str, object], path: str) -> tuple[bool, object]:
    """The value at a dotted key path ("sessionContext.rootSessionId"), and whether it is there:
    some agents nest the fields others give at the top level."""
    value: object = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _event_name(named: object, hint: str | None) -> str:
    name = named if isinstance(named, str) and named else hint
    if not name:
        raise InvalidInput("hook payload names no event (no hook_event_name, no event argument)")
    if not _EVENT_NAME.fullmatch(name):
        raise InvalidInput("hook event name is not a plain identifier")
    return name


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _token(value: object) -> str | None:
    # An id some agent gives as a number (Copilot CLI's hook timestamps) is its decimal text.
    return str(value) if type(value) is int else _text(value)


def _path(value: object) -> str | None:
    # A NUL byte or PATH_MAX bytes cannot be in a real path; such a value is absent, not trusted.
    text = _text(value)
    return text if text is not None and holdable_path(text) else None


def _said(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None
