"""Claude Code's statusLine payloads (real captures of 2.1.197 and 2.1.332) and the line ctxd
prints back."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxd.agents.claude.statusline import parse_statusline
from ctxd.agents.statusline import MAX_PAYLOAD_BYTES, StatusView, render_statusline
from ctxd.core.events import StatuslineReport
from ctxd.errors import InvalidInput

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "statusline"
LINES = [
    pytest.param(line, id=f"{path.stem}#{n}")
    for path in sorted(PAYLOADS.glob("*.jsonl"))
    for n, line in enumerate(path.read_bytes().splitlines())
]


def _report(version: str, n: int) -> StatuslineReport:
    lines = (PAYLOADS / f"claude-{version}.jsonl").read_bytes().splitlines()
    return parse_statusline(lines[n])


def _view(**changes: object) -> StatusView:
    base: dict[str, object] = {
        "model": "Opus 4.6",
        "tokens": 450_000,
        "window": 1_000_000,
        "window_source": "statusline",
        "used_pct": 45.0,
        "tokens_to_compaction": 487_500,
        "severity": "ok",
    }
    base.update(changes)
    return StatusView(**base)  # type: ignore[arg-type]


def test_samples_are_present() -> None:
    assert len(LINES) >= 10


@pytest.mark.parametrize("line", LINES)
def test_every_real_payload_parses_and_renders_one_line(line: bytes) -> None:
    raw = orjson.loads(line)
    report = parse_statusline(line)
    assert report.session_id == raw["session_id"]
    assert report.transcript_path == raw["transcript_path"]
    assert report.transcript_path is not None
    assert report.transcript_path.endswith(f"{report.session_id}.jsonl")
    assert report.model_id == raw["model"]["id"]
    view = StatusView(
        model=report.model_name,
        tokens=report.tokens,
        window=report.window or 1_000_000,
        window_source="statusline",
        used_pct=report.used_pct,
        tokens_to_compaction=None,
        severity="ok",
    )
    out = render_statusline(view)
    assert out.endswith(b"\n")
    assert out.count(b"\n") == 1
    assert out.decode().startswith(report.model_name or "")


def test_before_the_first_reply_there_is_no_usage() -> None:
    for version in ("2.1.197", "2.1.332"):
        report = _report(version, 0)
        assert report.tokens is None
        assert report.used_pct is None
        assert report.window == 1_000_000


def test_after_a_reply_the_figures_are_claude_codes_own() -> None:
    report = _report("2.1.332", 1)
    assert report.model_id == "claude-opus-5-5"
    assert report.model_name == "Opus 5.5"
    assert report.tokens == 1000 + 2000 + 100_000  # output tokens are not context
    assert report.used_pct == 10.0
    assert report.window == 1_000_000
    near_full = _report("2.1.332", 2)
    assert near_full.tokens == 925_000
    assert near_full.used_pct == 93.0


def test_the_claude_code_version_is_read() -> None:
    # Claude Code's compaction rule differs between versions for some models.
    assert {_report("2.1.197", n).agent_version for n in range(3)} == {"2.1.197"}
    assert _report("2.1.332", 1).agent_version == "2.1.332"


def test_the_1m_model_id_suffix_is_kept() -> None:
    assert _report("2.1.197", 1).model_id == "claude-opus-4-8[1m]"
    assert _report("2.1.197", 1).model_name == "Opus 4.8 (1M context)"


def test_after_compact_zero_usage_is_zero_not_unknown() -> None:
    report = _report("2.1.332", 3)
    assert report.tokens == 0
    assert report.used_pct == 0.0


def test_null_window_is_none() -> None:
    payload = {"session_id": "s", "context_window": {"context_window_size": None}}
    report = parse_statusline(orjson.dumps(payload))
    assert report.window is None
    assert report.tokens is None
    assert report.model_id is None


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"[]",
        b'{"model": {}}',
        b'{"session_id": "../../etc/passwd"}',
        b'{"session_id": 7}',
        b"{" * (MAX_PAYLOAD_BYTES + 1),
    ],
    ids=["empty", "text", "array", "no-session", "path-session", "int-session", "huge"],
)
def test_malformed_statusline_payload_is_invalid_input(payload: bytes) -> None:
    with pytest.raises(InvalidInput):
        parse_statusline(payload)


def test_wrong_types_in_context_window_are_ignored() -> None:
    payload = {
        "session_id": "s",
        "model": "opus",
        "context_window": {
            "context_window_size": True,
            "used_percentage": "93",
            "current_usage": {"input_tokens": "5", "cache_read_input_tokens": 10},
        },
    }
    report = parse_statusline(orjson.dumps(payload))
    assert report.window is None
    assert report.used_pct is None
    assert report.tokens == 10
    assert report.model_id is None


# --- rendering --------------------------------------------------------------------------------


def test_renders_the_documented_example() -> None:
    assert (
        render_statusline(_view())
        == "Opus 4.6 ▓▓▓▓░░░░░░ 45% of window · 450k/1M · 487k to compact\n".encode()
    )


def test_severity_marker_survives_without_colour() -> None:
    ok = render_statusline(_view()).decode()
    warning = render_statusline(_view(severity="warning")).decode()
    critical = render_statusline(_view(severity="critical")).decode()
    assert warning == "! " + ok
    assert critical == "!! " + ok
    assert "\x1b" not in ok + warning + critical
    assert render_statusline(_view(severity="bogus")).decode() == ok


def test_no_usage_yet() -> None:
    line = render_statusline(_view(tokens=None, used_pct=None, tokens_to_compaction=None))
    assert line == "Opus 4.6 ░░░░░░░░░░ no usage yet · window 1M\n".encode()


def test_percentage_from_tokens_when_claude_gave_none() -> None:
    line = render_statusline(
        _view(tokens=600_000, window=1_048_576, used_pct=None, window_source="transcript")
    ).decode()
    assert " 57% " in line
    assert "▓▓▓▓▓░░░░░" in line
    assert "600k/1M" in line


def test_a_guessed_window_is_marked_as_approximate() -> None:
    # No source gave the window: ctxd's default is a guess, "~" as an estimated figure is.
    assert "450k/~1M " in render_statusline(_view(window_source="default")).decode()
    idle = _view(tokens=None, used_pct=None, tokens_to_compaction=None, window_source="default")
    assert render_statusline(idle).decode().endswith(" · window ~1M\n")
    assert "450k/1M " in render_statusline(_view(window_source="table")).decode()


def test_compaction_due() -> None:
    line = render_statusline(_view(tokens=970_000, used_pct=97.0, tokens_to_compaction=-7_500))
    assert line.decode().endswith(" · compaction due\n")
    assert "▓▓▓▓▓▓▓▓▓░ 97%" in line.decode()


def test_full_bar_only_when_full() -> None:
    assert "▓▓▓▓▓▓▓▓▓░ 99%" in render_statusline(_view(used_pct=99.4)).decode()
    assert "▓▓▓▓▓▓▓▓▓▓ 100%" in render_statusline(_view(used_pct=100.0)).decode()
    assert "▓▓▓▓▓▓▓▓▓▓ 104%" in render_statusline(_view(used_pct=104.0)).decode()


@pytest.mark.parametrize(
    ("tokens", "shown"),
    [
        (0, "0/"),
        (950, "950/"),
        (1_500, "1.5k/"),
        (12_345, "12k/"),
        (999_999, "999k/"),
        (1_200_000, "1.2M/"),
    ],
)
def test_token_counts_are_compact(tokens: int, shown: str) -> None:
    assert f" {shown}" in render_statusline(_view(tokens=tokens, used_pct=None)).decode()


def test_width_sets_the_bar_length() -> None:
    line = render_statusline(_view(), width=20).decode()
    assert "▓" * 9 + "░" * 11 + " 45%" in line


def test_hostile_model_name_stays_on_one_line() -> None:
    line = render_statusline(_view(model="Evil\nmodel\x1b[2J\r" + "x" * 100))
    assert line.count(b"\n") == 1
    assert b"\x1b" not in line
    assert b"\r" not in line
    assert line.startswith(b"Evil model")
    assert "…".encode() in line


def test_no_model_name() -> None:
    assert render_statusline(_view(model=None)).startswith("▓▓▓▓░░░░░░ 45%".encode())


def test_a_usage_beyond_the_window_says_the_window_is_too_small() -> None:
    line = render_statusline(
        _view(tokens=213_000, window=200_000, window_source="table", used_pct=106.5)
    )
    assert "107% of window · 213k/200k · window too small?" in line.decode()
    assert "▓" * 10 in line.decode()


def test_no_auto_compaction_and_an_estimate_are_said() -> None:
    text = render_statusline(
        _view(tokens_to_compaction=None, auto_compaction=False, estimated=True)
    ).decode()
    assert "~450k/1M" in text and text.rstrip().endswith("no auto-compaction")
