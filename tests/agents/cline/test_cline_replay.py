"""`ctxd replay` over a real Cline CLI 3.0.65 session (captured by tests/e2e/test_cline_e2e.py):
the agent detected, the figures the mock reported, the compaction Cline made."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ctxd.cli.replay import Row, replay
from ctxd.core.window import Window

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


def test_a_model_only_clines_service_knows_gets_its_window_from_where_cline_compacted(
    tmp_path: Path,
) -> None:
    """Cline's own provider serves models its catalog lists nowhere (`cline-free/…`): ctxd
    guesses until Cline compacts, then reads the window off that compaction, though Cline
    compacted below its point (on its estimate of the next request). The figures are a real
    Desktop session's: it compacted after an answer of 178,902, its point 180,000."""
    folder = tmp_path / "sessions" / SESSION
    shutil.copytree(MESSAGES.parent, folder)
    doc = json.loads(MESSAGES.read_text())
    answers = [m for m in doc["messages"] if m["role"] == "assistant"]
    figures = [150_000, 170_000, 175_000, 177_123, 178_902, 24_500, 26_000, 26_000]
    for message, tokens in zip(answers, figures, strict=True):
        message["modelInfo"] = {"id": "cline-free/deepseek-v4.1-flash", "provider": "cline"}
        message["metrics"]["inputTokens"] = tokens
    (folder / MESSAGES.name).write_text(json.dumps(doc))

    rows = [r for r in replay(str(folder / MESSAGES.name)) if isinstance(r, Row)]

    before, after = rows[0].figures, rows[-1].figures
    assert before.window.source == "default"  # a guess, shown as one
    assert after.window == Window(200_000, "compaction")
    assert after.compaction_at == 180_000  # 0.9 of the usable input, as Cline counts
