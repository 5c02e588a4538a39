"""Where Qwen Code writes its transcripts, and how to recognise one.

`<QWEN_HOME, else ~/.qwen>/projects/<cwd with every non-alphanumeric as "-">/chats/<session>.jsonl`
(0.24.4). Each line is one record `{uuid, parentUuid, sessionId, timestamp, type, ...}`, `type`
one of user | assistant | tool_result | system, messages in Gemini's `parts` shape. Subagents
write their own files under `projects/<cwd>/subagents/`, which are not session transcripts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "has_layout",
    "is_transcript",
    "qwen_home",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

_RECORD_TYPES = ("user", "assistant", "tool_result", "system")


def qwen_home(env: Mapping[str, str]) -> Path:
    """`$QWEN_HOME` when set (a leading `~` is the user's home), else `~/.qwen`."""
    value = env.get("QWEN_HOME")
    if not value:
        return home(env) / ".qwen"
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def transcript_root(env: Mapping[str, str]) -> Path:
    return qwen_home(env) / "projects"


def _is_chat_name(name: str) -> bool:
    # Gemini CLI's chats are `session-<time>-<id8>.jsonl`; Qwen Code names them by session id.
    stem = name.removesuffix(".jsonl")
    return (
        name.endswith(".jsonl")
        and not name.startswith("session-")
        and PLAIN_TOKEN.fullmatch(stem) is not None
    )


def is_transcript(path: str) -> bool:
    return _is_chat_name(os.path.basename(path)) and f"{os.sep}chats{os.sep}" in path


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 4
        and parts[-2] == "chats"
        and parts[-4] == "projects"
        and _is_chat_name(parts[-1])
    )


def recognises(record: Mapping[str, Any]) -> bool:
    # Claude Code's records share uuid/parentUuid/sessionId; Qwen Code's alone carry
    # `provenance`, and their messages hold `parts`, not `content`.
    if record.get("type") not in _RECORD_TYPES or "uuid" not in record:
        return False
    if "sessionId" not in record or "parentUuid" not in record:
        return False
    message = record.get("message")
    return isinstance(record.get("provenance"), str) or (
        isinstance(message, Mapping) and "parts" in message
    )


def recognises_prefix(prefix: bytes) -> bool:
    # Key order as Qwen Code writes it (Claude Code starts with parentUuid or type).
    return (
        prefix.startswith(b'{"uuid":"')
        and b'"parentUuid":' in prefix
        and b'"sessionId":"' in prefix
    )


def session_id_from_path(path: str) -> str | None:
    stem = os.path.basename(path).removesuffix(".jsonl")
    return stem if PLAIN_TOKEN.fullmatch(stem) else None
