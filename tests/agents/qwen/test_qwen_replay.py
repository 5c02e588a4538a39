"""`ctxd replay` over the real Qwen Code 0.24.4 transcripts: the figures are the usage the mock
API reported (usage.compress.json), the window the one Qwen Code recorded, the compression the
one it did, and the severities the ones its own threshold (850,000 of 1,000,000) implies."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxd.cli.replay import Row, replay

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "qwen-code-0.24.4"


def test_the_compress_timeline() -> None:
    rows = [r for r in replay(str(DATA / "transcript.compress.jsonl")) if isinstance(r, Row)]
    timeline = [(r.figures.tokens, r.compaction, r.figures.severity.name.lower()) for r in rows]
    assert timeline == [
        (12_000, False, "ok"),
        (900_000, False, "critical"),  # past 850,000: Qwen Code compressed before the next call
        (897_733, True, "critical"),  # its own estimate of the compressed prompt
        (30_000, False, "ok"),
        (31_000, False, "ok"),
        (31_000, False, "ok"),
        (31_000, False, "ok"),  # --continue: the same file, read on
        (31_000, False, "ok"),
    ]
    last = rows[-1].figures
    assert (last.window.size, last.window.source) == (1_000_000, "agent")
    assert last.compaction_at == 850_000


def test_the_cli_detects_a_qwen_transcript_by_its_content() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", str(DATA / "transcript.print.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "16,500" in out and "window: agent" in out, out
