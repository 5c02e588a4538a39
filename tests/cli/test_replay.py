"""`ctxd replay` over real transcripts agrees with what each agent and its API reported.

Expected figures come from the harness runs that produced the transcripts:
- Claude Code 2.1.332 `compact`: the mock reported input 5,000 + cache_creation 20,000 +
  cache_read 100k..850k per turn; compactMetadata postTokens 2,723 (auto) and 2,625 (manual);
  the post-compaction reply reported 3,000 + 5,000.
- Codex CLI 0.171.0 `autocompact` (scenarios/autocompact.mock.json): input 120,000 and 250,000
  (+100 output each; Codex counts input + output), the compaction request 3,000 + 200, the
  compacted estimate 6,884 from the `token_count` after `compacted`, then 9,000 + 20; Codex
  reports `model_context_window` 258,400.
- Gemini CLI 0.61.0 `compress`: promptTokenCount 12,000 then 600,000 (which triggered
  compression), then the rebuilt history's estimate, then 5,000 and 7,000.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ctxd.cli.replay import Row, replay

DATA = Path(__file__).parents[1] / "data" / "transcripts"


def _timeline(path: Path, window: int | None = None) -> list[tuple[int | None, bool, str]]:
    rows = [item for item in replay(str(path), window=window) if isinstance(item, Row)]
    return [(r.figures.tokens, r.compaction, r.figures.severity.name.lower()) for r in rows]


def test_claude_code_timeline_matches_the_reported_usage_and_compactions() -> None:
    assert _timeline(DATA / "claude-code-2.1.332" / "transcript.compact.jsonl") == [
        (125_000, False, "ok"),
        (275_000, False, "ok"),
        (425_000, False, "ok"),
        (575_000, False, "ok"),
        # Claude Code's own point on 1M is 967,000, and it counts the reply's output too:
        # 725,000 + output leaves just under 25.02 % of the room, above the CRITICAL line.
        (725_000, False, "warning"),
        (875_000, False, "critical"),
        (2_723, True, "ok"),
        (8_000, False, "ok"),
        (2_625, True, "ok"),
    ]


def test_claude_code_2_1_197_does_not_auto_compact_opus_4_8_on_1m() -> None:
    # The brief: 2.1.197 took claude-opus-4-8 on 1M past 1.1M with no compaction of its own; it
    # compacted only when the API refused the prompt (this transcript's auto compaction).
    # The transcript's lines name the version, and the figures follow Claude Code's rule for it.
    path = DATA / "claude-code-2.1.197" / "transcript.compact.jsonl"
    rows = [item for item in replay(str(path)) if isinstance(item, Row)]
    assert rows and not any(r.figures.auto_compaction for r in rows)
    assert rows[5].figures.tokens == 875_000
    assert rows[5].figures.severity.name.lower() == "critical"  # 87.5 % of the window
    newer = DATA / "claude-code-2.1.332" / "transcript.compact.jsonl"
    assert all(r.figures.auto_compaction for r in replay(str(newer)) if isinstance(r, Row))


def test_codex_timeline_uses_its_own_window_and_counts_input_plus_output() -> None:
    rows = [i for i in replay(str(DATA / "codex-cli-0.171.0" / "rollout.autocompact.jsonl"))]
    timeline = [(r.figures.tokens, r.compaction) for r in rows if isinstance(r, Row)]
    assert timeline == [
        (120_100, False),
        (250_100, False),
        (3_200, False),
        (6_884, True),
        (9_020, False),
    ]
    last = [r for r in rows if isinstance(r, Row)][-1]
    assert (last.figures.window.size, last.figures.window.source) == (258_400, "agent")
    assert last.figures.compaction_at == 244_800  # 90 % of the 272,000 catalog window


def test_gemini_timeline_sees_the_compression_its_cli_did() -> None:
    timeline = _timeline(DATA / "gemini-cli-0.61.0" / "transcript.compress.1.jsonl")
    tokens = [t for t, _, _ in timeline]
    assert tokens[:2] == [12_000, 600_000]
    assert timeline[1][2] == "critical"  # past half the window, where Gemini CLI compresses
    after, compacted, _ = timeline[2]
    assert compacted is True and after is not None and after < 1_000
    assert tokens[-1] == 7_000


def test_window_option_overrides_every_source() -> None:
    timeline = _timeline(DATA / "claude-code-2.1.332" / "transcript.compact.jsonl", 2_000_000)
    assert timeline[5] == (875_000, False, "ok")


@pytest.mark.slow
def test_cli_json_last_line_is_the_final_state() -> None:
    path = DATA / "codex-cli-0.171.0" / "rollout.autocompact.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", str(path)],
        capture_output=True,
        check=True,
    ).stdout
    lines = [orjson.loads(line) for line in out.splitlines()]
    final = lines[-1]
    assert final["final"] is True
    assert {
        k: final[k] for k in ("tokens", "window", "window_source", "severity", "compactions")
    } == {
        "tokens": 9_020,
        "window": 258_400,
        "window_source": "agent",
        "severity": "ok",
        "compactions": 1,
    }
    assert final["used_pct"] == pytest.approx(100 * 9_020 / 258_400, abs=0.01)
    assert all("tokens" in line for line in lines[:-1])


@pytest.mark.parametrize("window", ["0", "-5", "lots"])
@pytest.mark.slow
def test_cli_rejects_a_window_that_is_not_positive(window: str) -> None:
    path = DATA / "codex-cli-0.171.0" / "rollout.autocompact.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--window", window, str(path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "--window" in result.stderr and result.stdout == ""


# ---------------------------------------------------------------- the configuration replay reads

COMPACT = DATA / "claude-code-2.1.332" / "transcript.compact.jsonl"


def _cli(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", str(path)],
        env=env,
        capture_output=True,
        text=True,
    )


def _first_row(env: dict[str, str]) -> dict[str, object]:
    result = _cli(COMPACT, env)
    assert result.returncode == 0, result.stderr
    row: dict[str, object] = orjson.loads(result.stdout.splitlines()[0])
    return row


@pytest.mark.parametrize(
    ("variables", "point"),
    [
        ({}, 967_000),  # claude-opus-5-5 on 1M: W - 20,000 - 13,000
        ({"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"}, 490_000),
        ({"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}, 467_000),
        ({"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"}, 979_000),
    ],
)
@pytest.mark.slow
def test_replay_reads_the_agents_variables_as_a_hook_reports_them(
    env: dict[str, str], variables: dict[str, str], point: int
) -> None:
    # What the daemon would say of the same session: Claude Code's own rule under the
    # variables its hooks pass on (the brief's bisected points).
    assert _first_row({**env, **variables})["compaction_at"] == point


@pytest.mark.slow
def test_replay_reads_the_agents_settings_file(env: dict[str, str], tmp_path: Path) -> None:
    settings = tmp_path / "claude-config" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"autoCompactWindow": 500000}')
    row = _first_row({**env, "CLAUDE_CONFIG_DIR": str(settings.parent)})
    assert row["compaction_at"] == 467_000


@pytest.mark.slow
def test_replay_reads_ctxds_own_settings(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "config" / "ctxd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[windows]\n"claude-opus-5-5" = 500000\n')
    row = _first_row(env)
    # The [windows] table, over the built-in one: the figures follow it.
    assert (row["window"], row["compaction_at"]) == (500_000, 467_000)


@pytest.mark.slow
def test_replay_names_a_config_it_cannot_use(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "config" / "ctxd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[windows]\nnot toml at all = = =\n")
    result = _cli(COMPACT, env)
    assert result.returncode != 0 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert str(config) in line


def _pi_entry(entry_type: str, entry_id: str, **fields: object) -> bytes:
    at = "2026-11-30T10:00:00.000Z"
    return orjson.dumps({"type": entry_type, "id": entry_id, "timestamp": at, **fields})


def _pi_answer(entry_id: str, prompt: int, output: int = 40) -> bytes:
    usage = {"input": prompt // 10, "output": output, "cacheRead": prompt - prompt // 10}
    usage |= {"cacheWrite": 0, "totalTokens": prompt + output}
    message: dict[str, object] = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    message |= {"provider": "openai-codex", "model": "gpt-5.6-sol", "usage": usage}
    return _pi_entry("message", entry_id, message=message | {"stopReason": "stop"})


def test_replay_keeps_the_window_a_pi_session_proved_through_its_compaction(
    tmp_path: Path,
) -> None:
    """The real gpt-5.6-sol session's shape: 371,566 held (pi's catalog row is 272,000), a
    compaction, then small answers. The window stays what 371,566 proved: the
    372,000 OpenAI states for the model, neither pi's catalog's 272,000 nor a common 400,000."""
    header = {"type": "session", "version": 3, "id": "01a2f0c4-0000-7000-8000-000000000001"}
    lines = [
        orjson.dumps(header | {"timestamp": "2026-11-30T10:00:00.000Z", "cwd": "/w"}),
        _pi_entry("model_change", "m0", provider="openai-codex", modelId="gpt-5.6-sol"),
        _pi_entry("message", "s0", message={"role": "system", "content": "You are pi."}),
        _pi_entry("message", "u0", message={"role": "user", "content": "go"}),
        _pi_answer("a1", 250_000),
        _pi_answer("a2", 371_566),
        _pi_entry("compaction", "c1", summary="x" * 4_000, firstKeptEntryId="a2", tokensBefore=1),
        _pi_entry(
            "usage",
            "w1",
            kind="cache_warm",
            provider="openai-codex",
            model="gpt-5.6-sol",
            usage={"input": 0, "output": 0, "cacheRead": 380_000, "totalTokens": 380_000},
        ),
        _pi_answer("a3", 30_000),
        _pi_answer("a4", 45_000),
    ]
    path = tmp_path / "2026-11-30T10-00-00-000Z_01a2f0c4-0000-7000-8000-000000000001.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    turns = [(r["tokens"], r["window"], r["window_source"]) for r in rows if not r.get("final")]
    assert turns == [
        (250_000, 272_000, "agent"),  # pi's own catalog's (openai-codex), not Codex's 258,400
        (371_566, 372_000, "usage"),
        (turns[2][0], 372_000, "usage"),  # the compaction's estimate
        (30_000, 372_000, "usage"),  # the cache warming moved nothing
        (45_000, 372_000, "usage"),
    ]
    assert rows[-1]["final"] is True and rows[-1]["window"] == 372_000
