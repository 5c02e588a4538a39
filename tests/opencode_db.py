"""OpenCode databases for tests: a copy of the one the real CLI 1.18.33 wrote
(tests/data/transcripts/opencode-1.18.33/), in WAL mode as OpenCode keeps it, and rows added to
it as OpenCode writes them (a session, its messages, their parts), each part's JSON shaped as
the captured ones."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import orjson

CAPTURE = Path(__file__).parent / "data" / "transcripts" / "opencode-1.18.33" / "opencode.db"
#: The captured session: the mock's prompt_tokens 10,000, 15,000, 20,000 (mock-model).
CAPTURED = "ses_dcc44cf90ffeorGSkkrofIPjZq"


class Writer:
    """Rows added to an OpenCode database, in the order OpenCode writes them."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        # ids and times on from the rows already there (a writer opened again goes on), times
        # from now: a daemon reads a database's sessions active in its live window only.
        (rows,) = self.db.execute("select (select count(*) from part) + count(*) from message")
        self.n = int(rows[0])
        self.clock = max(1_796_164_300_000, int(time.time() * 1000)) + 1000 * self.n  # ms

    def _next(self, prefix: str) -> tuple[str, int]:
        self.n += 1
        self.clock += 1000
        return f"{prefix}_{self.n:06d}", self.clock

    def session(self, session_id: str, parent: str | None = None, cwd: str = "/w") -> str:
        project = self.db.execute("select project_id from session limit 1").fetchone()[0]
        self.db.execute(
            "insert into session (id, project_id, parent_id, slug, directory, title, version,"
            " time_created, time_updated) values (?, ?, ?, 's', ?, 't', '1.18.33', ?, ?)",
            (session_id, project, parent, cwd, self.clock, self.clock),
        )
        self.db.commit()
        return session_id

    def message(self, session_id: str, role: str = "assistant", **data: Any) -> str:
        message_id, at = self._next("msg")
        doc = {"role": role, "time": {"created": at}, **data}
        if role == "assistant":
            doc.setdefault("modelID", "mock-model")
            doc.setdefault("providerID", "mock")
        self.db.execute(
            "insert into message values (?, ?, ?, ?, ?)",
            (message_id, session_id, at, at, orjson.dumps(doc).decode()),
        )
        self.db.commit()
        return message_id

    def part(self, session_id: str, message_id: str, **data: Any) -> str:
        part_id, at = self._next("prt")
        self.db.execute(
            "insert into part values (?, ?, ?, ?, ?, ?)",
            (part_id, message_id, session_id, at, at, orjson.dumps(data).decode()),
        )
        self.db.commit()
        return part_id

    def step(self, session_id: str, context: int, output: int = 40, **message: Any) -> str:
        """One model call: an assistant message whose step reports `context` (cache.read
        4,000 of it, as the mock's) and `output`."""
        tokens = {
            "total": context + output,
            "input": context - 4000,
            "output": output,
            "reasoning": 0,
            "cache": {"write": 0, "read": 4000},
        }
        msg = self.message(session_id, "assistant", **message)
        self.part(session_id, msg, type="step-start")
        self.part(session_id, msg, type="step-finish", reason="stop", tokens=tokens, cost=0)
        return msg

    def compaction(self, session_id: str, summary_output: int) -> None:
        """An automatic compaction as OpenCode 1.18.33 records it: a user message with a
        `compaction` part, then the summary (an assistant message, `summary: true`)."""
        ask = self.message(session_id, "user")
        self.part(session_id, ask, type="compaction", auto=True, overflow=True)
        self.step(
            session_id, 4000 + summary_output, summary_output, summary=True, mode="compaction"
        )

    def close(self) -> None:
        self.db.close()


def copy_capture(directory: Path, name: str = "opencode.db", *, live: bool = True) -> Path:
    """The capture in `directory`; `live`: its session touched now, as OpenCode leaves a session
    just used (a daemon reads only the sessions active in its live window)."""
    path = directory / name
    shutil.copy(CAPTURE, path)
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode=wal")
    if live:
        db.execute("update session set time_updated = ?", (int(time.time() * 1000),))
        db.commit()
    db.close()
    return path
