"""A window no source gave (ctxd's default) is shown as a guess wherever a user reads it: `ctxd
status` (the list and one session in full), the statusline ctxd renders, `ctxd replay`; a window
a source gave is shown as before. Real daemon, hook client and CLI processes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

DATA = Path(__file__).parents[1] / "data"
STATUSLINE = DATA / "payloads" / "statusline" / "claude-2.1.332.jsonl"
#: A model no table, id suffix or report gives a window for.
UNKNOWN = "acme-mystery-7"


def _session(ctxd: World, model: str, tokens: int) -> ClaudeTranscript:
    t = ctxd.claude()
    t.model = model
    t.assistant(tokens)
    ctxd.hook_out("claude", t.payload("PostToolUse"))
    return t


def test_status_says_a_default_window_is_a_guess_and_for_which_model(ctxd: World) -> None:
    guessed = _session(ctxd, UNKNOWN, 30_000)
    known = _session(ctxd, "claude-opus-5-5[1m]", 30_000)
    rows = {s["session_id"]: s for s in json.loads(ctxd.cli("status", "--json").stdout)["sessions"]}
    window = rows[guessed.session_id]["window"]
    assert rows[guessed.session_id]["window_source"] == "default"

    listing = ctxd.cli("status").stdout
    assert f"30,000 / ~{window:,}" in listing, listing
    assert f"window guessed: no source for model {UNKNOWN}" in listing, listing
    assert "30,000 / 1,000,000" in listing and "window: model-id" in listing, listing

    full = ctxd.cli("status", guessed.session_id).stdout
    assert f"30,000 of ~{window:,}" in full, full
    assert f"guessed: no source for model {UNKNOWN}; [windows] in ctxd's config sets it" in full
    other = ctxd.cli("status", known.session_id).stdout
    assert "30,000 of 1,000,000" in other, other
    assert re.search(r"^window from: +model-id$", other, re.M), other
    assert "guessed" not in other, other


def test_the_statusline_marks_a_guessed_window_with_a_tilde(ctxd: World) -> None:
    t = _session(ctxd, UNKNOWN, 30_000)
    doc = json.loads(STATUSLINE.read_text().splitlines()[0])
    # A statusline that states no window (as Copilot CLI's may not) for a model none is known of.
    doc.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(ctxd.work))
    doc["model"] = {"id": UNKNOWN, "display_name": "Mystery"}
    doc["context_window"] = {"current_usage": None}
    line = ctxd.hook("claude", json.dumps(doc).encode(), "statusline").stdout.decode()
    assert "30k/~" in line, line
    assert "?" not in line, line


def test_replay_says_the_window_was_guessed(tmp_path: Path) -> None:
    export = DATA / "transcripts" / "opencode-1.18.33" / "export.compact.json"
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", str(export)],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert out[1].split()[4] == "~1,000,000", out[1]
    assert out[-1].endswith("window guessed: no source for model mock-model)"), out[-1]
