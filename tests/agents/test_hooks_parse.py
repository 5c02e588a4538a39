"""parse_hook on every real hook payload captured from Claude Code, Gemini CLI and Codex CLI
(Qwen Code's, made by its own harness, are checked in tests/agents/qwen/test_qwen_hooks.py).

The samples live in tests/data/payloads/<agent>/<version>/<scenario>/NN-Event[.variant].json,
copied from the harness captures. What each one must parse to is derived from its file name
(the event the capture hook was registered for, and the variant the harness saw), not from the
parser.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxd.agents import parse as parse_hook
from ctxd.core.events import EventKind, HookEvent

PAYLOADS = Path(__file__).parents[1] / "data" / "payloads"
SAMPLES = sorted(
    p for agent in ("claude", "gemini", "codex") for p in (PAYLOADS / agent).rglob("*.json")
)

# What a user of ctxd relies on: which events count as a tool call, a prompt, a stop, a real
# compaction. Gemini's PreCompress fires before every model turn, so it is not a compaction.
EXPECTED_KIND: dict[tuple[str, str], EventKind] = {
    ("claude", "PostToolUse"): "tool_call",
    # 2.1.332: a call that fails as it runs fires this instead of PostToolUse.
    ("claude", "PostToolUseFailure"): "tool_call",
    ("claude", "PreToolUse"): "other",
    ("claude", "UserPromptSubmit"): "prompt",
    ("claude", "Stop"): "stop",
    ("claude", "SubagentStop"): "subagent_stop",
    ("claude", "PreCompact"): "compaction",
    ("claude", "PostCompact"): "compaction",
    ("claude", "SessionStart"): "session_start",
    ("claude", "SessionEnd"): "session_end",
    ("claude", "Notification"): "other",
    ("claude", "PreModelSwitch"): "model_switch",
    ("claude", "PostModelSwitch"): "model_switched",
    # 2.1.335: a turn stopped without Stop; its output is ignored, it is recorded as activity.
    ("claude", "Interrupt"): "other",
    ("gemini", "AfterTool"): "tool_call",
    ("gemini", "BeforeTool"): "other",
    ("gemini", "BeforeAgent"): "prompt",
    ("gemini", "AfterAgent"): "stop",
    ("gemini", "PreCompress"): "other",
    ("gemini", "SessionStart"): "session_start",
    ("gemini", "SessionEnd"): "session_end",
    ("gemini", "Notification"): "other",
    ("codex", "PostToolUse"): "tool_call",
    ("codex", "PreToolUse"): "other",
    ("codex", "UserPromptSubmit"): "prompt",
    ("codex", "Stop"): "stop",
    ("codex", "PreCompact"): "compaction",
    ("codex", "PostCompact"): "compaction",
    ("codex", "SessionStart"): "session_start",
    ("codex", "SessionEnd"): "session_end",
}
# Events whose file-name variant is the source / trigger / reason.
SOURCE_EVENTS = {
    "Interrupt",  # its `source`: user, session or system
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "PostCompact",
    "PreCompress",
    "PreModelSwitch",
    "PostModelSwitch",
}


def _describe(path: Path) -> tuple[str, str, str | None]:
    agent = path.relative_to(PAYLOADS).parts[0]
    stem = path.name.removesuffix(".json").split("-", 1)[1]
    name, _, variant = stem.partition(".")
    return agent, name, variant or None


def _parse(path: Path) -> tuple[HookEvent, dict[str, object]]:
    raw = path.read_bytes()
    agent, _, _ = _describe(path)
    return parse_hook(agent, raw), orjson.loads(raw)


def _id(path: Path) -> str:
    return str(path.relative_to(PAYLOADS))


def test_samples_cover_every_agent_and_scenario() -> None:
    # Guards the parametrisation below against an empty or partial copy of the samples.
    seen = {_describe(p)[:2] for p in SAMPLES}
    assert seen == set(EXPECTED_KIND)
    scenarios = {p.relative_to(PAYLOADS).parts[:3] for p in SAMPLES}
    assert len(scenarios) >= 20


@pytest.mark.parametrize("path", SAMPLES, ids=_id)
def test_real_payload_parses(path: Path) -> None:
    agent, name, variant = _describe(path)
    event, raw = _parse(path)

    assert event.agent == agent
    assert event.name == name
    expected_kind = EXPECTED_KIND[agent, name]
    if name == "SessionStart" and variant == "compact":
        expected_kind = "compaction"  # Claude and Codex: the start after a real compaction
    assert event.kind == expected_kind
    assert event.session_id == raw["session_id"]
    assert event.transcript_path == raw["transcript_path"]
    assert event.cwd == raw["cwd"]
    assert event.stop_hook_active is (variant == "stop_hook_active")
    assert event.source == (variant if name in SOURCE_EVENTS else None)


@pytest.mark.parametrize("path", SAMPLES, ids=_id)
def test_transcript_path_belongs_to_the_session(path: Path) -> None:
    event, _ = _parse(path)
    assert event.transcript_path is not None
    if event.agent == "gemini":
        # ~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl
        assert event.transcript_path.endswith(f"-{event.session_id[:8]}.jsonl")
    else:
        # Claude: <project>/<session_id>.jsonl; Codex: rollout-<ts>-<session_id>.jsonl
        assert event.transcript_path.endswith(f"{event.session_id}.jsonl")


def test_a_model_switch_names_both_models_and_the_context_size() -> None:
    # Captured from the real 2.1.332 in SDK mode (a `set_model` control request).
    switches = [p for p in SAMPLES if _describe(p)[1].endswith("ModelSwitch")]
    assert len(switches) == 2
    for path in switches:
        event, raw = _parse(path)
        assert event.to_model == raw["to_model"] == "claude-sonnet-4-6"
        assert event.context_tokens == raw["context_tokens"] == 13_050


def test_subagent_stop_names_the_subagent_and_its_transcript() -> None:
    stops = [p for p in SAMPLES if _describe(p)[1] == "SubagentStop"]
    assert stops
    for path in stops:
        event, _ = _parse(path)
        assert event.kind == "subagent_stop"
        assert event.agent_id is not None
        assert event.agent_transcript_path is not None
        assert event.agent_transcript_path.endswith(
            f"{event.session_id}/subagents/agent-{event.agent_id}.jsonl"
        )


def test_main_chain_events_carry_no_agent_id() -> None:
    # In every captured run, only SubagentStop came from a subagent.
    for path in SAMPLES:
        event, _ = _parse(path)
        if event.kind != "subagent_stop":
            assert event.agent_id is None, path


def test_a_failed_call_names_its_tool_call() -> None:
    """PostToolUseFailure carries the failed call's `tool_use_id`, which the reader waits for
    as after PostToolUse."""
    failures = [p for p in SAMPLES if _describe(p)[1] == "PostToolUseFailure"]
    assert len(failures) == 2
    for path in failures:
        event, raw = _parse(path)
        assert event.kind == "tool_call"
        assert event.tool_use_id == raw["tool_use_id"]
        assert "error" in raw and "tool_response" not in raw


def test_agent_id_on_a_tool_event_is_exposed() -> None:
    # Claude Code adds agent_id to events fired inside a subagent; the daemon must be able to
    # tell them from the parent's (subagents share the parent's session_id).
    payload = {
        "session_id": "s1",
        "hook_event_name": "PostToolUse",
        "transcript_path": "/t/s1.jsonl",
        "cwd": "/w",
        "agent_id": "a075576dd443f4b96",
        "agent_type": "general-purpose",
    }
    event = parse_hook("claude", orjson.dumps(payload))
    assert event.kind == "tool_call"
    assert event.agent_id == "a075576dd443f4b96"


def test_agent_id_that_is_not_a_token_is_dropped() -> None:
    payload = {"session_id": "s1", "hook_event_name": "PostToolUse", "agent_id": "../../x"}
    assert parse_hook("claude", orjson.dumps(payload)).agent_id is None


def test_codex_and_claude_name_the_model() -> None:
    codex = [p for p in SAMPLES if p.relative_to(PAYLOADS).parts[0] == "codex"]
    for path in codex:
        event, raw = _parse(path)
        assert event.model == raw.get("model")
    assert any(_parse(p)[0].model == "gpt-5.5" for p in codex)
    claude_start = PAYLOADS / "claude/2.1.332/compact/17-SessionStart.compact.json"
    assert _parse(claude_start)[0].model == "claude-opus-5-5"


@pytest.mark.parametrize(
    "path",
    [
        PAYLOADS / "claude/2.1.332/print/04-PostToolUse.json",
        PAYLOADS / "gemini/0.61.0/print/05-AfterTool.json",
        PAYLOADS / "codex/0.171.0/exec/04-PostToolUse.json",
    ],
    ids=_id,
)
def test_event_hint_is_used_when_the_payload_names_no_event(path: Path) -> None:
    agent, name, _ = _describe(path)
    raw = orjson.loads(path.read_bytes())
    del raw["hook_event_name"]
    event = parse_hook(agent, orjson.dumps(raw), event_hint=name)
    assert event.name == name
    assert event.kind == "tool_call"


def test_payload_event_name_wins_over_the_hint() -> None:
    path = PAYLOADS / "claude/2.1.332/print/07-Stop.json"
    event = parse_hook("claude", path.read_bytes(), event_hint="PostToolUse")
    assert event.name == "Stop"
    assert event.kind == "stop"


def test_missing_optional_fields_become_none() -> None:
    event = parse_hook("gemini", b'{"session_id":"abc","hook_event_name":"AfterTool"}')
    assert event.transcript_path is None
    assert event.cwd is None
    assert event.source is None
    assert event.model is None
    assert event.stop_hook_active is False


def test_stop_hook_active_must_be_true_not_truthy() -> None:
    payload = b'{"session_id":"abc","hook_event_name":"Stop","stop_hook_active":"yes"}'
    assert parse_hook("claude", payload).stop_hook_active is False
