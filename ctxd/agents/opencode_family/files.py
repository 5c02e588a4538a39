"""The family writes no transcript files: its sessions are in one database (`store`). Its data
directory is the root watched, for the changes to that database and its WAL. The one file of a
session there is is the JSON `opencode export` (`kilo export`) prints (`export`), told by its
content: both print the same document, whose `info.version` says which of them did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxd.agents.lines import decode, leading_members
from ctxd.agents.opencode_family import export
from ctxd.agents.opencode_family.family import Family
from ctxd.agents.opencode_family.store import database_path

__all__ = ["FamilyFiles"]


@dataclass(frozen=True, slots=True)
class FamilyFiles:
    """One family member's `TranscriptFiles`."""

    family: Family

    def transcript_root(self, env: Mapping[str, str]) -> Path:
        return database_path(self.family, env).parent

    def is_transcript(self, path: str) -> bool:
        return False

    def has_layout(self, path: str) -> bool:
        return False

    def recognises(self, record: Mapping[str, Any]) -> bool:
        info = record.get("info")
        version = info.get("version") if isinstance(info, dict) else None
        # An export whose head did not reach its version is told by its shape alone.
        return export.recognises(record) and (
            not isinstance(version, str) or self.family.exported_by(version)
        )

    def recognises_prefix(self, prefix: bytes) -> bool:
        document = export.after_exporting_line(prefix)
        if document is None:
            return export.recognises_prefix(prefix)
        # Saved with the line the export writes first: the document after it says whose.
        first = decode(document.split(b"\n", 1)[0])
        members = first if first is not None else leading_members(document)
        if members is None:
            return export.recognises_prefix(document)
        return self.recognises(members)

    def session_id_from_path(self, path: str) -> str | None:
        return None
