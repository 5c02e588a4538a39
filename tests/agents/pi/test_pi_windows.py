"""The window a pi session proved by its own usage: a model that comes in several windows (the
gpt-5.6 family: 272,000 in pi's catalog, 372,000 and up to 872,000 as OpenAI states it) is
judged on the one the session showed it ran with, through its compaction and after it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parents[2]))
from ctxd_process import replay_json


def _entry(kind: str, entry_id: str, **fields: Any) -> bytes:
    return orjson.dumps({"type": kind, "id": entry_id, **fields}) + b"\n"


def _answer(entry_id: str, prompt: int, output: int, stop: str = "toolUse") -> bytes:
    usage = {
        "input": prompt // 10,
        "output": output,
        "cacheRead": prompt - prompt // 10,
        "cacheWrite": 0,
        "totalTokens": prompt + output,
    }
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "api": "openai-codex-responses",
        "provider": "openai-codex",
        "model": "gpt-5.6-sol",
        "usage": usage,
        "stopReason": stop,
    }
    return _entry("message", entry_id, message=message)


def _session(tmp_path: Path) -> Path:
    """The shape of a real gpt-5.6-sol session under pi 1.x: it held 371,566 (prompt and
    answer), its next request overflowed at 371,606 and pi compacted."""
    header = {
        "type": "session",
        "version": 3,
        "id": "0199aaaa-0000-7000-8000-000000000001",
        "timestamp": "2026-11-30T10:00:00.000Z",
        "cwd": "/home/u/project",
    }
    overflow = {
        "role": "assistant",
        "content": [],
        "provider": "openai-codex",
        "model": "gpt-5.6-sol",
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0},
        "stopReason": "error",
        "errorMessage": "Your input exceeds the context window of this model.",
    }
    lines = [
        orjson.dumps(header) + b"\n",
        _entry("model_change", "m1", provider="openai-codex", modelId="gpt-5.6-sol"),
        _answer("a1", 120_000, 800),
        _answer("a2", 370_766, 800),  # held 371,566
        _entry("message", "a3", message=overflow),
        _entry(
            "compaction", "c1", summary="s" * 4_000, firstKeptEntryId="a3", tokensBefore=371_606
        ),
        _answer("a4", 40_000, 500, stop="stop"),
    ]
    path = tmp_path / "2026-11-30T10-00-00-000Z_0199aaaa-0000-7000-8000-000000000001.jsonl"
    path.write_bytes(b"".join(lines))
    return path


def test_a_gpt_5_6_session_ends_on_the_window_it_proved(tmp_path: Path) -> None:
    lines = replay_json(str(_session(tmp_path)))
    final = lines[-1]
    assert (final["agent"], final["model"]) == ("pi", "gpt-5.6-sol")
    assert final["compactions"] == 1
    assert final["tokens"] == 40_000
    # 371,566 is more than pi's 272,000: the model ran with the owner's 372,000 (not 400,000),
    # and the compaction did not make ctxd forget it
    assert (final["window"], final["window_source"]) == (372_000, "usage")
    assert final["compaction_at"] == 372_000 - 16_384 + 1
    assert [line["window"] for line in lines[:-1]] == [272_000, 372_000, 372_000, 372_000]
