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


def test_a_payload_that_names_no_last_call_gives_what_remains() -> None:
    """A GitHub-hosted model's payload: `used_percentage` and `remaining_tokens` against the
    window, no `last_call_*` counts; that figure is the one Copilot itself shows."""
    payload = json.loads(sorted(PAYLOADS.glob("interactive/*-statusline.json"))[-1].read_text())
    context = payload["context_window"]
    for key in [k for k in context if k.startswith("last_call_")]:
        del context[key]
    context.update(context_window_size=168_000, remaining_tokens=126_000, used_percentage=25)
    payload["model"] = {"id": "claude-opus-4.8", "display_name": "Claude Opus 4.8"}
    report = parse_statusline(json.dumps(payload).encode())
    assert (report.tokens, report.window, report.used_pct) == (42_000, 168_000, 25.0)
    assert report.model_id == "claude-opus-4.8"
    # nothing used yet: no figure
    context.update(remaining_tokens=168_000, used_percentage=0)
    assert parse_statusline(json.dumps(payload).encode()).tokens is None
