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
