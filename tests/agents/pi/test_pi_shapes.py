"""Shapes real pi sessions take beyond the captures: sessions of version 1 (linear, before
entries had ids and the header a `version`), which pi still loads, and answers whose provider
reported no usage."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parents[2]))
from ctxd_process import replay_json

from ctxd.agents.pi.transcript import PiReader


def test_a_version_1_session_is_told_by_its_header_and_replayed(tmp_path: Path) -> None:
    usage = {"input": 3, "output": 12, "cacheRead": 0, "cacheWrite": 5_120, "totalTokens": 5_135}
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": usage,
        "stopReason": "stop",
    }
    lines = [
        # no `version`, no ids: what pi wrote before its sessions became trees
        {"type": "session", "id": "0a1b2c3d", "timestamp": "2025-12-03T14:00:00Z", "cwd": "/p"},
        {"type": "message", "timestamp": "2025-12-03T14:00:01Z", "message": {"role": "user"}},
        {"type": "message", "timestamp": "2025-12-03T14:00:02Z", "message": answer},
    ]
    path = tmp_path / "2025-12-03T14-00-00-000Z_0a1b2c3d.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    final = replay_json(str(path))[-1]
    assert (final["agent"], final["tokens"], final["model"]) == ("pi", 5_123, "claude-sonnet-4-5")


def test_an_answer_whose_provider_reported_no_usage_keeps_the_figure() -> None:
    """Some OpenAI-compatible servers report no usage: pi's answer has all zeros, and pi
    skips it when it counts the context; the figure stays the last answer's that had one."""

    def answer(entry_id: str, prompt: int) -> bytes:
        usage = {"input": prompt, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        message: dict[str, object] = {"role": "assistant", "content": [], "model": "m"}
        message |= {"stopReason": "stop", "usage": usage | {"totalTokens": prompt}}
        return orjson.dumps({"type": "message", "id": entry_id, "message": message}) + b"\n"

    reader = PiReader()
    (first,) = reader.feed(answer("a1", 42_000))
    assert first.tokens == 42_000
    assert reader.feed(answer("a2", 0)) == []
    (third,) = reader.feed(answer("a3", 43_000))
    assert third.tokens == 43_000


def test_what_pi_prints_in_json_mode_is_replayed(tmp_path: Path) -> None:
    """`pi --mode json` prints the session header, then events: each answer in `message_end`
    (again in `turn_end`), a compaction's result in `compaction_end`."""
    usage = {"input": 2_000, "output": 150, "cacheRead": 48_000, "cacheWrite": 0}
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "done"}],
        "provider": "openai-codex",
        "model": "gpt-5.6-sol",
        "usage": usage | {"totalTokens": 50_150},
        "stopReason": "stop",
        "timestamp": 1_796_543_410_979,
    }
    later = answer | {"usage": usage | {"cacheRead": 33_000, "totalTokens": 35_150}}
    result = {"summary": "s", "firstKeptEntryId": "x", "tokensBefore": 50_150}
    events = [
        {"type": "session", "version": 3, "id": "0199", "timestamp": "2026-12-01T10:00:00Z"}
        | {"cwd": "/p"},
        {"type": "agent_start"},
        {"type": "message_end", "message": {"role": "user", "content": "go", "timestamp": 1}},
        {"type": "message_update", "usage": usage, "assistantMessageEvent": {"type": "x"}},
        {"type": "message_end", "message": answer},
        {"type": "turn_end", "message": answer, "toolResults": []},
        {"type": "compaction_start", "reason": "manual"},
        {"type": "compaction_end", "reason": "manual", "aborted": True},  # changed nothing
        {"type": "compaction_end", "result": result | {"estimatedTokensAfter": 32_000}},
        {"type": "message_end", "message": later},
        {"type": "agent_end", "messages": [later], "willRetry": False},
    ]
    path = tmp_path / "pi-json-mode.jsonl"
    path.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    lines = replay_json(str(path))
    assert [(line["tokens"], line["compaction"]) for line in lines[:-1]] == [
        (50_000, False),
        (32_000, True),
        (35_000, False),
    ]
    assert (lines[-1]["agent"], lines[-1]["compactions"]) == ("pi", 1)
