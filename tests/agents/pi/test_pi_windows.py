"""The window of a pi session: pi's own, from its catalog by the answer's provider and model
unless ctxd's extension stated it in the session; and the window the session proved by its own
usage: a model that comes in several windows (the gpt-5.6 family: 272,000 in pi's catalog,
372,000 and up to 872,000 as OpenAI states it) is judged on the one the session showed it ran
with, through its compaction and after it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

sys.path.insert(0, str(Path(__file__).parents[2]))
from ctxd_process import replay_json

from ctxd.agents.pi.transcript import PiReader


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


# ------------------------------------------------------- pi's own catalog, by provider and model


def _said(provider: str, model: str, entry_id: str, prompt: int) -> bytes:
    usage = {"input": prompt, "output": 10, "cacheRead": 0, "cacheWrite": 0}
    message = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    message |= {"provider": provider, "model": model, "stopReason": "stop"}
    return _entry("message", entry_id, message=message | {"usage": usage | {"totalTokens": 0}})


def _ctxd(entry_id: str, window: int) -> bytes:
    return _entry("custom", entry_id, customType="ctxd", data={"contextWindow": window})


def test_every_figure_carries_pi_s_catalog_window_for_the_last_answer() -> None:
    reader = PiReader()
    updates = reader.feed(
        _said("anthropic", "claude-sonnet-4-6", "a1", 30_000)
        + _entry("compaction", "c1", summary="s" * 400, firstKeptEntryId="a1", tokensBefore=1)
        + _said("github-copilot", "gpt-5", "a2", 20_000)
        + _said("mock", "mock-model", "a3", 10_000)  # a models.json provider: in no catalog
        + _ctxd("x1", 200_000)
        + _said("anthropic", "claude-sonnet-4-6", "a4", 12_000)
    )
    assert [(u.compaction, u.catalog_window, u.reported_window) for u in updates] == [
        (False, 1_000_000, None),
        (True, 1_000_000, None),  # the compaction: the same model's
        (False, 128_000, None),  # github-copilot's gpt-5, not openai's 400,000
        (False, None, None),
        (False, None, 200_000),  # ctxd's extension states the window
        (False, 1_000_000, 200_000),  # ...which outranks the catalog's
    ]


def _replay(tmp_path: Path, *entries: bytes) -> list[dict[str, Any]]:
    header = {"type": "session", "version": 3, "id": "0199bbbb-0000-7000-8000-000000000002"}
    header |= {"timestamp": "2026-11-30T10:00:00.000Z", "cwd": "/home/u/project"}
    path = tmp_path / "2026-11-30T10-00-00-000Z_0199bbbb-0000-7000-8000-000000000002.jsonl"
    path.write_bytes(orjson.dumps(header) + b"\n" + b"".join(entries))
    return replay_json(str(path))


@pytest.mark.parametrize(
    ("entries", "window", "source"),
    [
        # pi's catalog's window is the agent's: the one pi compacts against
        ((_said("anthropic", "claude-opus-4-6", "a1", 30_000),), 1_000_000, "agent"),
        ((_said("github-copilot", "claude-opus-4.7", "a1", 30_000),), 144_000, "agent"),
        # pi's figure in the session (its live one, a models.json window too) wins
        (
            (_ctxd("x1", 400_000), _said("anthropic", "claude-opus-4-6", "a1", 30_000)),
            400_000,
            "agent",
        ),
        # a provider in no catalog: ctxd's tables, as before
        ((_said("mock", "claude-sonnet-4-6", "a1", 30_000),), 200_000, "table"),
        ((_said("mock", "mock-model", "a1", 30_000),), 1_000_000, "default"),
    ],
)
def test_a_session_s_window_is_pi_s_own(
    tmp_path: Path, entries: tuple[bytes, ...], window: int, source: str
) -> None:
    final = _replay(tmp_path, *entries)[-1]
    assert (final["window"], final["window_source"]) == (window, source)
    assert final["compaction_at"] == window - 16_384 + 1
