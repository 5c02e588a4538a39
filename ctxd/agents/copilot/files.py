"""Where GitHub Copilot CLI writes its session files, and how to recognise one.

`<COPILOT_HOME, else ~/.copilot>/session-state/<session id>/events.jsonl` (1.0.102). Each line is
one event `{"type", "data", "id", "timestamp", "parentId"}`, `type` a dotted name
(`session.start`, `user.message`, `assistant.message`, `session.usage_record`, `hook.start`,
...; `schemas/session-events.schema.json` in the CLI's unpacked package lists them all).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "EVENTS_FILE",
    "copilot_home",
    "has_layout",
    "implied_transcript",
    "is_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

EVENTS_FILE = "events.jsonl"
_STATE_DIR = "session-state"


def copilot_home(env: Mapping[str, str]) -> Path:
    """`$COPILOT_HOME` when set (a leading `~` is the user's home), else `~/.copilot`."""
    value = env.get("COPILOT_HOME")
    if not value:
        return home(env) / ".copilot"
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def transcript_root(env: Mapping[str, str]) -> Path:
    return copilot_home(env) / _STATE_DIR


def implied_transcript(session_id: str, env: Mapping[str, str]) -> str | None:
    """The events file of session `session_id`: only agentStop and preCompact name it, every
    other hook gives the session id alone."""
    if PLAIN_TOKEN.fullmatch(session_id) is None:
        return None
    return str(transcript_root(env) / session_id / EVENTS_FILE)


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 3
        and parts[-1] == EVENTS_FILE
        and parts[-3] == _STATE_DIR
        and PLAIN_TOKEN.fullmatch(parts[-2]) is not None
    )


def is_transcript(path: str) -> bool:
    return has_layout(path)


def recognises(record: Mapping[str, Any]) -> bool:
    # No other agent's records pair a dotted `type` with `data` and `parentId`.
    kind = record.get("type")
    return (
        isinstance(kind, str)
        and "." in kind
        and isinstance(record.get("data"), Mapping)
        and "parentId" in record
        and "id" in record
    )


#: The start of an event as Copilot CLI writes it (type, then data), with any JSON spacing: a
#: file that went through another writer has `{"type": "...", "data": {`.
_EVENT_START = re.compile(rb'\{\s*"type"\s*:\s*"[A-Za-z_]+\.[A-Za-z_.]+"\s*,\s*"data"\s*:\s*\{')


def recognises_prefix(prefix: bytes) -> bool:
    return _EVENT_START.match(prefix[:200]) is not None


def session_id_from_path(path: str) -> str | None:
    if os.path.basename(path) != EVENTS_FILE:
        return None
    name = os.path.basename(os.path.dirname(path))
    return name if PLAIN_TOKEN.fullmatch(name) else None
