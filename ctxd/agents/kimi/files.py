"""Where Kimi Code writes its transcripts, and how to recognise one.

`<KIMI_CODE_HOME, else ~/.kimi-code>/sessions/<workspace>/<session id>/agents/<agent>/wire.jsonl`
(2.1.0): `<workspace>` is `wd_<the working directory's name>_<12 hex digits of its sha256>`, the
session id `session_<uuid>`, the main agent's file under `agents/main/`; a subagent writes its own
`agents/<its id>/wire.jsonl`, which is not a session of its own. Each line is one record with a
dotted `type` (`metadata` first, then `turn.prompt`, `llm.request`, `usage.record`,
`context.append_loop_event`, `full_compaction.begin`, ...) and a `time` in epoch milliseconds.
Hooks name the session by id alone, so `implied_transcript` looks for it under each workspace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "WIRE_FILE",
    "has_layout",
    "implied_transcript",
    "is_transcript",
    "kimi_home",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

WIRE_FILE = "wire.jsonl"
MAIN_AGENT = "main"
_SESSIONS = "sessions"
_SESSION_PREFIX = "session_"
#: How many workspace folders a hook's session is looked for in (each is one stat): a home
#: with more is searched no further, and the watcher still finds the file.
_MAX_WORKSPACES = 2_000


def kimi_home(env: Mapping[str, str]) -> Path:
    """`$KIMI_CODE_HOME` when set (a leading `~` is the user's home), else `~/.kimi-code`."""
    value = env.get("KIMI_CODE_HOME")
    if not value:
        return home(env) / ".kimi-code"
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def transcript_root(env: Mapping[str, str]) -> Path:
    return kimi_home(env) / _SESSIONS


def _is_session_id(name: str) -> bool:
    return name.startswith(_SESSION_PREFIX) and PLAIN_TOKEN.fullmatch(name) is not None


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 4
        and parts[-1] == WIRE_FILE
        and parts[-2] == MAIN_AGENT
        and parts[-3] == "agents"
        and _is_session_id(parts[-4])
    )


def is_transcript(path: str) -> bool:
    return has_layout(path)


def session_id_from_path(path: str) -> str | None:
    parts = PurePath(path).parts
    return parts[-4] if has_layout(path) else None


def implied_transcript(session_id: str, env: Mapping[str, str]) -> str | None:
    """The main agent's wire file of session `session_id`, in whichever workspace folder holds
    it (None when none does yet: the watcher finds it when it appears)."""
    if not _is_session_id(session_id):
        return None
    root = transcript_root(env)
    try:
        with os.scandir(root) as entries:
            for n, entry in enumerate(entries):
                if n >= _MAX_WORKSPACES:
                    break
                candidate = os.path.join(entry.path, session_id, "agents", MAIN_AGENT, WIRE_FILE)
                if os.path.isfile(candidate):
                    return candidate
    except OSError:
        return None
    return None


def recognises(record: Mapping[str, Any]) -> bool:
    # The first line of every wire file: `{"type":"metadata","protocol_version":"1.5",...}`.
    return record.get("type") == "metadata" and isinstance(record.get("protocol_version"), str)


def recognises_prefix(prefix: bytes) -> bool:
    return prefix.startswith(b'{"type":"metadata","protocol_version":')
