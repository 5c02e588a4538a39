"""Qwen Code's hooks: every captured 0.24.4 payload parses to the event ctxd must see, and the
answers are exactly what the CLI was seen to act on (tests/data/payloads/qwen/0.24.4/, made by
tests/e2e/capture_qwen.py; the effects in tests/data/transcripts/qwen-code-0.24.4/)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxd.agents import parse, render
from ctxd.core.events import EventKind, Reply

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "qwen" / "0.24.4"
SAMPLES = sorted(PAYLOADS.rglob("*.json"))
TRANSCRIPTS = Path(__file__).parents[2] / "data" / "transcripts" / "qwen-code-0.24.4"

KIND: dict[str, EventKind] = {
    "PostToolUse": "tool_call",
    # 0.24.4: a call that fails as it runs fires this instead of PostToolUse.
    "PostToolUseFailure": "tool_call",
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "PostCompact": "compaction",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "PreToolUse": "other",
    "PostToolBatch": "other",
    "PreCompact": "other",  # fires before the summary request: the compression may still fail
    "Notification": "other",
}


def _event_name(path: Path) -> str:
    return path.stem.split("-", 1)[1]


def test_the_samples_cover_the_events_ctxd_uses() -> None:
    assert {_event_name(p) for p in SAMPLES} == set(KIND)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(PAYLOADS)))
def test_real_payload_parses(path: Path) -> None:
    raw = orjson.loads(path.read_bytes())
    event = parse("qwen", path.read_bytes())

    assert event.name == _event_name(path) == raw["hook_event_name"]
    compact = event.name == "SessionStart" and raw["source"] == "compact"
    assert event.kind == ("compaction" if compact else KIND[event.name])
    assert event.session_id == raw["session_id"]
    assert event.transcript_path == raw["transcript_path"]
    assert (event.transcript_path or "").endswith(f"/chats/{event.session_id}.jsonl")
    assert event.cwd == raw["cwd"]
    assert event.stop_hook_active is (raw.get("stop_hook_active") is True)
    assert event.source == (raw.get("source") or raw.get("trigger") or raw.get("reason"))
    if "tool_use_id" in raw:
        assert event.tool_use_id == raw["tool_use_id"]


def test_a_compression_is_seen_from_its_hooks_after_it_happened() -> None:
    names = [
        (_event_name(p), orjson.loads(p.read_bytes())) for p in SAMPLES if "compress" in str(p)
    ]
    order = [
        (name, parse("qwen", orjson.dumps(raw)).kind)
        for name, raw in names
        if name in ("PreCompact", "PostCompact", "SessionStart")
    ]
    assert order == [
        ("SessionStart", "session_start"),
        ("PreCompact", "other"),
        ("PostCompact", "compaction"),
        ("SessionStart", "compaction"),
        ("SessionStart", "session_start"),  # --continue: source "resume"
    ]


def test_a_manual_compression_and_the_end_of_the_ui() -> None:
    folder = PAYLOADS / "interactive"
    kinds = [
        (_event_name(p), parse("qwen", p.read_bytes()).kind, parse("qwen", p.read_bytes()).source)
        for p in sorted(folder.glob("*.json"))
        if _event_name(p) in ("PreCompact", "PostCompact", "SessionStart", "SessionEnd")
    ]
    assert kinds == [
        ("SessionStart", "session_start", "startup"),
        ("PreCompact", "other", "manual"),  # `/compress`
        ("PostCompact", "compaction", "manual"),
        ("SessionStart", "compaction", "compact"),
        ("SessionEnd", "session_end", "prompt_input_exit"),  # `/quit`
    ]


def _sample(path: str) -> bytes:
    return (PAYLOADS / path).read_bytes()


REPLY = Reply(context="CTX", user_message="MSG", block_reason="WHY")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "print/05-PostToolUse.json",
            {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "CTX"}},
        ),
        (
            "failure/05-PostToolUseFailure.json",
            {
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUseFailure",
                    "additionalContext": "CTX",
                }
            },
        ),
        (
            "print/03-UserPromptSubmit.json",
            {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": "CTX",
                }
            },
        ),
        (
            "print/01-SessionStart.json",
            {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "CTX"}},
        ),
        ("print/16-Stop.json", {"decision": "block", "reason": "WHY", "systemMessage": "MSG"}),
        # Already continuing because of a block: blocking again would loop.
        ("print/18-Stop.json", {"systemMessage": "MSG"}),
        ("print/04-PreToolUse.json", None),
        ("compress/13-PostCompact.json", None),
    ],
)
def test_render(path: str, expected: dict[str, object] | None) -> None:
    out = render(parse("qwen", _sample(path)), REPLY)
    assert (orjson.loads(out) if out else None) == expected


def test_the_cli_acted_on_these_answers() -> None:
    # The capture hook answered with these very shapes; the transcript shows their effect.
    text = (TRANSCRIPTS / "transcript.print.jsonl").read_text()
    assert "PostToolUse-CTX-MARKER" in text  # appended to the tool's result
    assert "<qwen:user-prompt-submit-context>\\nUserPromptSubmit-CTX-MARKER" in text
    # The Stop block's reason became the next turn's prompt, then Stop came back "active".
    assert orjson.loads(_sample("print/17-UserPromptSubmit.json"))["prompt"] == "STOP-BLOCK-MARKER"
    assert orjson.loads(_sample("print/18-Stop.json"))["stop_hook_active"] is True


def test_a_failed_call_is_a_tool_call_whose_context_reaches_the_model() -> None:
    """A read_file of a missing file and a shell command exiting 3 fire PostToolUseFailure,
    not PostToolUse; the capture hook's context was appended to each failed result."""
    failures = sorted((PAYLOADS / "failure").glob("*-PostToolUseFailure.json"))
    tools = [orjson.loads(p.read_bytes())["tool_name"] for p in failures]
    assert tools == ["read_file", "run_shell_command"]
    for path in failures:
        event = parse("qwen", path.read_bytes())
        assert event.kind == "tool_call"
    text = (TRANSCRIPTS / "transcript.failure.jsonl").read_text()
    assert "File not found: /nonexistent/missing\\n\\nPostToolUseFailure-CTX-MARKER" in text
    assert "Exit Code: 3" in text
