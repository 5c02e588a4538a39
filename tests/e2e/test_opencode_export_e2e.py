"""OpenCode's own export, against the real CLI: a session the real `opencode run` made (offline,
against mock_openai_chat.py: a step at 50,000, one at 170,000 that OpenCode compacts after, then
20,000 and 21,000), printed by the real `opencode export <session>`, replays in `ctxd replay` with
the figures the database it came from gives, row by row (tests/e2e/capture_opencode.py's
"compact" scenario, run here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from capture_opencode import capture
from ctxd_process import replay_json

pytestmark = pytest.mark.e2e

#: What a row says but its time: an export's step is timed by its message, the database's by
#: its part.
_TIMES = ("at", "session_id")


def _replay(*args: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k not in _TIMES} for line in replay_json(*args)]


def test_the_export_of_a_real_session_replays_as_its_database(
    opencode_bin: Path, netns: bool, tmp_path: Path
) -> None:
    db, _, _ = capture(tmp_path, "compact", opencode_bin)
    export = tmp_path / "compact" / "export.compact.json"
    from_db = _replay(str(db))
    from_export = _replay(str(export))
    assert [(row["tokens"], row["compaction"]) for row in from_export[:-1]] == [
        (50_000, False),
        (170_000, False),
        (5, True),
        (20_000, False),
        (21_000, False),
    ]
    from_db[-1].pop("parent_id")  # a database's session says whose subagent it is
    assert from_export == from_db
