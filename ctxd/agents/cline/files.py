"""Where Cline CLI keeps its sessions, and how to recognise one.

`<sessions>/<id>/<id>.messages.json` (3.0.65), as @cline/shared resolves its folders: Cline's own
folder is `$CLINE_DIR`, else `~/.cline`; its data `$CLINE_DATA_DIR`, else `<own>/data`; its
sessions `$CLINE_SESSION_DATA_DIR`, else `<data>/sessions` (`cline --data-dir D` sets
CLINE_DATA_DIR=D for its hooks; the hook client passes all three on: ctxd follows such a session
through its hooks). The file is one JSON document `{version, updated_at, agent, sessionId, origin,
messages, system_prompt}`, written whole again at every change. Beside it Cline keeps `<id>.json`
(the session's manifest) and, once it compacted, `<id>.compaction.json` (what the model is sent in
place of the messages it compacted). Session ids are `<ms>_<5 characters>`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "FOLDER_ENV",
    "compaction_path",
    "data_dir",
    "has_layout",
    "is_transcript",
    "messages_path",
    "own_dir",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

_SUFFIX = ".messages.json"


#: The variables that move Cline's folders, each over the one before it.
FOLDER_ENV = ("CLINE_DIR", "CLINE_DATA_DIR", "CLINE_SESSION_DATA_DIR")


def _folder(env: Mapping[str, str], name: str) -> Path | None:
    """The folder variable `name` names (a leading `~` is the user's home), None when unset."""
    value = env.get(name, "").strip()
    if not value:
        return None
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def own_dir(env: Mapping[str, str]) -> Path:
    """Cline's own folder, where its global hooks are: `$CLINE_DIR`, else `~/.cline`."""
    return _folder(env, "CLINE_DIR") or home(env) / ".cline"


def data_dir(env: Mapping[str, str]) -> Path:
    """`$CLINE_DATA_DIR`, else the own folder's `data`."""
    return _folder(env, "CLINE_DATA_DIR") or own_dir(env) / "data"


def transcript_root(env: Mapping[str, str]) -> Path:
    """`$CLINE_SESSION_DATA_DIR`, else the data folder's `sessions`."""
    return _folder(env, "CLINE_SESSION_DATA_DIR") or data_dir(env) / "sessions"


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
