"""Where Cline CLI keeps its sessions, and how to recognise one.

`<data>/sessions/<id>/<id>.messages.json` (3.0.65), `<data>` being `$CLINE_DATA_DIR`, else
`~/.cline/data` (`cline --data-dir D` sets CLINE_DATA_DIR=D for its hooks, which the hook
client passes on: ctxd follows such a session through its hooks). The file is one JSON
document `{version, updated_at, agent, sessionId, origin, messages, system_prompt}`, written
whole again at every change. Beside it Cline keeps
`<id>.json` (the session's manifest) and, once it compacted, `<id>.compaction.json` (what the
model is sent in place of the messages it compacted). Session ids are `<ms>_<5 characters>`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "compaction_path",
    "data_dir",
    "has_layout",
    "is_transcript",
    "messages_path",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

_SUFFIX = ".messages.json"


def data_dir(env: Mapping[str, str]) -> Path:
    """`$CLINE_DATA_DIR` when set (a leading `~` is the user's home), else `~/.cline/data`."""
    value = env.get("CLINE_DATA_DIR", "").strip()
    if not value:
        return home(env) / ".cline" / "data"
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def transcript_root(env: Mapping[str, str]) -> Path:
    return data_dir(env) / "sessions"


def messages_path(session_id: str, env: Mapping[str, str]) -> str | None:
    """The messages file of session `session_id` (a plain token only: never a path)."""
    if not PLAIN_TOKEN.fullmatch(session_id) or session_id.startswith("."):
        return None
    return str(transcript_root(env) / session_id / f"{session_id}{_SUFFIX}")


def compaction_path(messages: str) -> str:
    """The compaction record beside a messages file."""
    return messages.removesuffix(_SUFFIX) + ".compaction.json"


def _session_of(name: str, folder: str) -> str | None:
    stem = name.removesuffix(_SUFFIX)
    if stem == name or stem != folder or not PLAIN_TOKEN.fullmatch(stem):
        return None
    return stem


def is_transcript(path: str) -> bool:
    return _session_of(os.path.basename(path), os.path.basename(os.path.dirname(path))) is not None


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 3
        and parts[-3] == "sessions"
        and _session_of(parts[-1], parts[-2]) is not None
    )


def recognises(record: Mapping[str, Any]) -> bool:
    # The document's leading members: Cline's alone have `origin` with its `source`.
    origin = record.get("origin")
    return (
        isinstance(record.get("sessionId"), str)
        and "updated_at" in record
        and isinstance(origin, Mapping)
        and "source" in origin
    )


def recognises_prefix(prefix: bytes) -> bool:
    return False  # the document is indented: its members are judged whole


def session_id_from_path(path: str) -> str | None:
    return _session_of(os.path.basename(path), os.path.basename(os.path.dirname(path)))
