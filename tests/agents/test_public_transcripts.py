"""Real transcripts nobody here wrote (tests/data/public/, sources and licences in its README),
replayed by ctxd and compared with an independent, naive computation
(tests/public_reference.py): every assistant turn's figure, the final figure, the window a
transcript states, and the compactions it records."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
import public_reference as reference
from ctxd_process import replay_json

from ctxd.cli.replay import Row, replay
from ctxd.core.session import SessionState

FILES = reference.all_files()

#: Compactions each file records (the reference counts them for pi only).
COMPACTIONS = {"codex/rollout-codex0.104-desktop-compacted.jsonl": 1}
#: The pi 0.x session, in pi's own layout: `sessions/--<cwd>--/<header time>_<session id>.jsonl`.
PI = (
    "pi/sessions/--Users-francojc-Projects-francojc-tt--/"
    "2026-04-22T01-21-23-990Z_019db2c5-7527-757d-8ddc-7ae7f3591d4b.jsonl"
)


def _name(path: str) -> str:
    return os.path.relpath(path, reference.DATA_DIR)


def test_the_public_set_is_all_here() -> None:
    assert len(FILES) == 32
    for agent in ("claude", "codex", "gemini", "copilot", "opencode", "pi", "qwen"):
        assert any(_name(p).startswith(f"{agent}/") for p in FILES), agent


@pytest.mark.parametrize("path", FILES, ids=_name)
def test_replay_matches_the_reference(path: str) -> None:
    expected = reference.expected(path)
    items = list(replay(path))
    rows = [item for item in items if isinstance(item, Row)]
    final = items[-1]
    assert isinstance(final, SessionState)

    assert final.agent == expected["agent"]
    # One row per turn; a compaction's estimate is ctxd's own figure, not the agent's.
    measured = [row.figures.tokens for row in rows if not row.figures.estimated]
    assert measured == expected["turn_tokens"]
    assert final.tokens == expected["final_tokens"]
    if expected["window"] is not None:
        assert rows[-1].figures.window.size == expected["window"]
        assert rows[-1].figures.window.source == "agent"
    assert final.compactions == COMPACTIONS.get(_name(path), len(expected.get("compactions", ())))
    # No figure on these files is above its window: nothing is flagged.
    assert not any(row.figures.over_window for row in rows)


@pytest.mark.parametrize(
    "name",
    [
        "gemini/chats/session-2026-03-kind.json",  # a single-object recording
        "claude/agent-c8d9b115.jsonl",  # a 2.0.x subagent beside its session
    ],
)
def test_the_cli_replays_what_it_used_to_refuse(name: str) -> None:
    path = os.path.join(reference.DATA_DIR, name)
    lines = replay_json(path)
    final = lines[-1]
    assert final["final"] is True
    assert final["tokens"] == reference.expected(path)["final_tokens"]
    assert [line["tokens"] for line in lines[:-1]] == reference.expected(path)["turn_tokens"]


@pytest.mark.parametrize(
    "name",
    ["gemini/chats/session-2026-03-kind.json", "gemini/chats/session-2025-10-zero-tokens.json"],
)
@pytest.mark.parametrize("copy_as", ["some-recording.json", "recording"])
def test_an_indented_recording_replays_under_any_name(
    name: str, copy_as: str, tmp_path: Path
) -> None:
    # Told by its content: outside `chats/session-*`, and without its suffix too.
    source = os.path.join(reference.DATA_DIR, name)
    path = tmp_path / copy_as
    path.write_bytes(Path(source).read_bytes())
    lines = replay_json(str(path))
    assert lines[-1]["agent"] == "gemini"
    assert lines[-1]["tokens"] == reference.expected(source)["final_tokens"]
    assert [line["tokens"] for line in lines[:-1]] == reference.expected(source)["turn_tokens"]


def test_a_copilot_session_with_usage_checkpoints_ends_on_the_last_requests_prompt() -> None:
    """1.0.93 on a GitHub-hosted model: after each turn a usage checkpoint states the last
    model call's prompt as the API reported it; two processes (a resume), so the shutdowns'
    metrics are not one request's, and their own count (18,299) is not the figure."""
    name = "copilot/session-state/1fc398c2-e820-4e06-9dfd-8a9205f95437/events.jsonl"
    path = os.path.join(reference.DATA_DIR, name)
    lines = replay_json(path)
    assert [line["tokens"] for line in lines] == [23_728, 23_906, 23_906]
    assert reference.expected(path)["turn_tokens"] == [23_728, 23_906]
    final = lines[-1]
    assert (final["agent"], final["agent_version"], final["model"]) == (
        "copilot",
        "1.0.93",
        "claude-sonnet-5.5",
    )
    assert final["estimated"] is False


@pytest.mark.parametrize(
    ("name", "version", "model"),
    [
        # written through another JSON writer: a space after every colon and comma
        (
            "copilot/session-state/66957610-db49-4dea-972d-c079e1898044/events.jsonl",
            "1.0.49-1",
            "claude-sonnet-4.6",
        ),
        # a task subagent (claude-haiku-4.5) ran inside the turn
        (
            "copilot/session-state/030f200c-c26f-4ef0-9099-6d1156c83631/events.jsonl",
            "1.0.55-1",
            "claude-opus-4.7-1m-internal",
        ),
        # autopilot, two model changes (the second the same model at another effort)
        (
            "copilot/session-state/96ef38f0-9d09-45c3-8124-6448c36090ed/events.jsonl",
            "1.0.34",
            "claude-sonnet-4.6",
        ),
    ],
)
def test_a_github_hosted_copilot_session_ends_on_copilots_own_count(
    name: str, version: str, model: str
) -> None:
    """No per-request usage on a GitHub-hosted model: the shutdown's `currentTokens` is the
    figure (several requests in the process), marked estimated."""
    path = os.path.join(reference.DATA_DIR, name)
    final = replay_json(path)[-1]
    assert final["tokens"] == reference.expected(path)["final_tokens"]
    assert (final["agent"], final["agent_version"], final["model"]) == ("copilot", version, model)
    assert final["estimated"] is True


def test_a_pi_0x_session_ends_on_its_last_answers_prompt() -> None:
    """pi 0.x (session version 3, no version of pi in the file) on Anthropic's
    claude-sonnet-4-6: 50 answers, each the prompt it read (input + cacheRead + cacheWrite). Two
    `custom` entries of a side-question extension (`btw-thread-entry`) carry a `usage` of their
    own, of another context (16,041 while the conversation's was 17,391): they are no answers.
    No entry of ctxd's extension states the window: it is pi's own catalog's for anthropic
    claude-sonnet-4-6, 1,000,000 (ctxd's shared table says 200,000)."""
    path = os.path.join(reference.DATA_DIR, PI)
    lines = replay_json(path)
    final = lines[-1]
    assert (final["agent"], final["model"], final["agent_version"]) == (
        "pi",
        "claude-sonnet-4-6",
        None,
    )
    assert final["turns"] == len(lines) - 1 == 50
    assert final["tokens"] == 1 + 32_553 + 363
    assert (final["window"], final["window_source"]) == (1_000_000, "agent")
    assert final["compaction_at"] == 1_000_000 - 16_384 + 1
    # pi compares the answer's whole totalTokens (33,319, the output too) with that point
    assert final["tokens_to_compaction"] == 983_617 - 33_319
    assert {(line["window"], line["window_source"]) for line in lines} == {(1_000_000, "agent")}
    assert final["estimated"] is False


def test_a_pi_session_is_told_by_its_header_under_its_upstream_name(tmp_path: Path) -> None:
    # Committed upstream as `session.jsonl`, outside pi's layout.
    path = tmp_path / "session.jsonl"
    path.write_bytes(Path(reference.DATA_DIR, PI).read_bytes())
    lines = replay_json(str(path))
    assert lines[-1]["agent"] == "pi"
    assert [line["tokens"] for line in lines[:-1]] == reference.expected(
        os.path.join(reference.DATA_DIR, PI)
    )["turn_tokens"]


#: The pi 0.x session on GitHub Copilot's subscription (`github-copilot`, claude-opus-4.6).
PI_COPILOT = (
    "pi/sessions/--root-trl--/2026-05-27T10-29-44-398Z_019e68d1-e031-7fc4-aae5-4d20a4e36675.jsonl"
)


def test_a_pi_session_on_a_copilot_subscription_states_every_answers_prompt() -> None:
    """76 answers through GitHub Copilot (costs all 0: a subscription), each the prompt the
    model read, the cached part included: 5,238 at first, 66,589 at the end. The window is pi
    0.73.1's catalog's for github-copilot claude-opus-4.6, 1,000,000 (pi 1.x's has the model no
    more; ctxd's shared table says 200,000)."""
    path = os.path.join(reference.DATA_DIR, PI_COPILOT)
    lines = replay_json(path)
    figures = [line["tokens"] for line in lines[:-1]]
    assert figures == reference.expected(path)["turn_tokens"]
    assert (len(figures), figures[0], figures[-1]) == (76, 5_238, 3 + 66_045 + 541)
    final = lines[-1]
    assert (final["agent"], final["model"], final["turns"]) == ("pi", "claude-opus-4.6", 76)
    assert final["estimated"] is False
    assert (final["window"], final["window_source"]) == (1_000_000, "agent")
    assert final["compaction_at"] == 1_000_000 - 16_384 + 1
    # the first answer's model too: the model_change to deepseek-v4-pro was never answered
    assert {(line["window"], line["window_source"]) for line in lines} == {(1_000_000, "agent")}


#: Qwen Code 0.24.4 on a paid API (DeepSeek's, OpenAI-compatible), a user's own session.
QWEN_DEEPSEEK = (
    "qwen/projects/-home-roman-spine-wow-live-arch-session-v2/chats/"
    "72ad38cc-8824-47e5-8810-befe1cda9227.jsonl"
)


def test_a_qwen_session_on_a_paid_api_states_every_answers_prompt_and_its_window() -> None:
    """64 answers of deepseek-v4-flash, each the prompt the API counted (nearly all of it
    cached: 147,072 of the last 147,208); every record states the window Qwen Code counts
    against (1,000,000, which ctxd's tables do not know for this model) and its version."""
    path = os.path.join(reference.DATA_DIR, QWEN_DEEPSEEK)
    lines = replay_json(path)
    figures = [line["tokens"] for line in lines[:-1]]
    assert figures == reference.expected(path)["turn_tokens"]
    assert (len(figures), figures[0], figures[-1]) == (64, 20_233, 147_208)
    final = lines[-1]
    assert (final["agent"], final["model"], final["agent_version"]) == (
        "qwen",
        "deepseek-v4-flash",
        "0.24.4",
    )
    assert (final["window"], final["window_source"]) == (1_000_000, "agent")
    assert final["compaction_at"] == 850_000  # Qwen Code's 0.85 of the window
    # Qwen compares the answer's whole totalTokenCount (the output too) with that point
    assert final["tokens_to_compaction"] == 850_000 - 148_028
    assert final["estimated"] is False
