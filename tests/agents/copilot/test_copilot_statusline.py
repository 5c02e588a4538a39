"""Copilot CLI's statusline payloads (real, 1.0.102 interactive UI) -> StatuslineReport."""

from __future__ import annotations

import json
from pathlib import Path

from ctxd.agents.copilot.statusline import parse_statusline

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "copilot" / "1.0.102"
USAGE = (
    Path(__file__).parents[2]
    / "data"
    / "transcripts"
    / "copilot-1.0.102"
    / "usage.interactive.json"
)


def test_the_captured_payloads() -> None:
    reports = [
        parse_statusline(p.read_bytes())
        for p in sorted(PAYLOADS.glob("interactive/*-statusline.json"))
    ]
    assert reports, "no statusline payloads captured"
    first, last = reports[0], reports[-1]
    # before the first answer every count is 0: no figure yet
    assert first.tokens is None and first.used_pct is None
    assert first.window == 64_000
    # the transcript path is the session's directory: its events file is meant
    assert last.transcript_path is not None and last.transcript_path.endswith(
        f"/session-state/{last.session_id}/events.jsonl"
    )
    prompts = [u["usage"]["prompt_tokens"] for u in json.loads(USAGE.read_text())]
    assert last.tokens == prompts[-1]  # the provider's figure, not Copilot's local estimate
    assert (last.model_id, last.agent_version) == ("gpt-4.1", "1.0.102")
    assert all(r.tokens is None or r.tokens in prompts for r in reports)
