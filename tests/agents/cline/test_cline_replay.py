"""`ctxd replay` over a real Cline CLI 3.0.65 session (captured by tests/e2e/test_cline_e2e.py):
the agent detected, the figures the mock reported, the compaction Cline made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxd.cli.replay import Row, replay

SESSION = "1796554282174_e2h89"
MESSAGES = (
    Path(__file__).parents[2]
    / "data"
    / "transcripts"
    / "cline-3.0.65"
    / "sessions"
    / SESSION
    / f"{SESSION}.messages.json"
)


def test_the_timeline() -> None:
    rows = [r for r in replay(str(MESSAGES)) if isinstance(r, Row)]
    assert [(r.figures.tokens, r.compaction) for r in rows if not r.compaction] == [
        (t, False) for t in (12_000, 18_000, 24_000, 28_000, 38_000, 24_500, 26_000, 26_000)
    ]
    assert sum(r.compaction for r in rows) == 1


def test_the_cli_detects_a_cline_session_by_its_content(tmp_path: Path) -> None:
    copy = tmp_path / "session.json"  # not Cline's layout: detected by the document itself
    copy.write_bytes(MESSAGES.read_bytes())
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", str(copy)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    final = out.stdout.strip().splitlines()[-1]
    assert "Cline CLI" in final and "26,000" in final, out.stdout
