"""Which agent wrote a transcript, from its path or its first bytes; and the reader for it.

- Claude Code: `<config>/projects/<slug>/<session id>.jsonl` (subagents:
  `<slug>/<session id>/subagents/agent-*.jsonl`); lines carry `type` and `sessionId`/`uuid`.
- Gemini CLI: `<home>/tmp/<project>/chats/session-*.jsonl`; line 1 is metadata
  `{sessionId, projectHash, startTime, ...}`, later lines are messages or `$set`/`$rewindTo`.
- Codex CLI: `<codex home>/sessions/YYYY/MM/DD/rollout-*.jsonl`; every line is
  `{timestamp, ordinal, type, payload}`, the first a `session_meta`.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from ctxd.errors import InvalidInput
from ctxd.transcript import Agent, TranscriptReader
from ctxd.transcript.claude import ClaudeReader
from ctxd.transcript.codex import CodexReader
from ctxd.transcript.gemini import GeminiReader
from ctxd.transcript.lines import decode

#: How many lines of `head` are looked at before giving up.
_HEAD_LINES = 8


def open_reader(agent: Agent, path: str | None = None) -> TranscriptReader:
    """A fresh incremental reader for `agent`'s transcript format (at `path`, when known)."""
    if agent == "claude":
        return ClaudeReader(subagent=path is not None and is_claude_subagent_path(path))
    if agent == "gemini":
        return GeminiReader()
    if agent == "codex":
        return CodexReader()
    raise InvalidInput(f"unknown agent {agent!r}")


def is_claude_subagent_path(path: str) -> bool:
    """`.../<session>/subagents/agent-<id>.jsonl`: a Claude subagent's own transcript."""
    parts = PurePath(path).parts
    return len(parts) >= 2 and parts[-2] == "subagents" and parts[-1].startswith("agent-")


def detect_agent_from_path(path: str) -> Agent | None:
    """The agent whose transcript layout `path` has, else None. Looks at the path only."""
    parts = PurePath(path).parts
    name = parts[-1] if parts else ""
    if not name.endswith(".jsonl"):
        return None
    if len(parts) >= 2 and parts[-2] == "chats" and name.startswith("session-"):
        return "gemini"
    if (
        len(parts) >= 5
        and parts[-5] == "sessions"
        and name.startswith("rollout-")
        and _is_date(parts[-4], parts[-3], parts[-2])
    ):
        return "codex"
    if len(parts) >= 3 and parts[-3] == "projects":
        return "claude"
    if len(parts) >= 5 and parts[-2] == "subagents" and parts[-5] == "projects":
        return "claude"
    return None


def detect_agent(head: bytes) -> Agent | None:
    """The agent whose line format the first bytes of a transcript have, else None.

    `head` may end in the middle of a line; complete lines are judged first, and a first line
    too long to be complete in `head` is judged by the keys it starts with.
    """
    lines = head.split(b"\n")
    complete, partial = lines[:-1], lines[-1]
    for line in complete[:_HEAD_LINES]:
        record = decode(line)
        if record is not None:
            agent = _agent_of(record)
            if agent is not None:
                return agent
    record = decode(partial)
    if record is not None:
        return _agent_of(record)
    if not complete:
        return _agent_of_prefix(partial)
    return None


def _agent_of(record: dict[str, Any]) -> Agent | None:
    if "$set" in record or "$rewindTo" in record:
        return "gemini"
    if "projectHash" in record and "sessionId" in record:
        return "gemini"
    kind = record.get("type")
    if "payload" in record and "timestamp" in record and isinstance(kind, str):
        return "codex"
    if isinstance(kind, str) and any(
        key in record for key in ("sessionId", "uuid", "leafUuid", "messageId")
    ):
        return "claude"
    if kind in ("user", "gemini", "info") and "id" in record:
        return "gemini"
    return None


def _agent_of_prefix(prefix: bytes) -> Agent | None:
    # Key order as the agents write it; only used for a first line cut off by `head`.
    if prefix.startswith(b'{"timestamp":') and b'"payload":' in prefix:
        return "codex"
    if prefix.startswith(b'{"sessionId":') and b'"projectHash":' in prefix:
        return "gemini"
    if prefix.startswith(b'{"parentUuid":'):
        return "claude"
    if prefix.startswith(b'{"type":"') and b'"sessionId":' in prefix:
        return "claude"
    return None


def _is_date(year: str, month: str, day: str) -> bool:
    return len(year) == 4 and len(month) == 2 and len(day) == 2 and (year + month + day).isdigit()
