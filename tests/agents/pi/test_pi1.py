"""pi 1.x (`@earendil-works/pi-coding-agent`): its sessions read from the real 1.6.0 captures
(tests/data/transcripts/pi-1.6.0/, made by tests/e2e/capture_pi.py) and the entries 1.x added:
system messages, `compaction.systemMessage`, `context_edit`, `usage`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson

from ctxd.agents.pi.transcript import PiReader

SESSIONS = Path(__file__).parents[2] / "data" / "transcripts" / "pi-1.6.0"


def _main_prompts(scenario: str) -> list[int]:
    usage = json.loads((SESSIONS / f"usage.{scenario}.json").read_text())
    return [u["usage"]["prompt_tokens"] for u in usage if u["kind"] == "main"]


def _records(scenario: str) -> list[dict[str, Any]]:
    lines = (SESSIONS / f"session.{scenario}.jsonl").read_bytes().splitlines()
    return [orjson.loads(line) for line in lines]


def _chars(message: dict[str, Any]) -> int:
    """pi's `estimateTokens`, naively: text, tool calls, a system message's sections."""
    content = message.get("content")
    chars = len(content) if isinstance(content, str) else 0
    for block in content if isinstance(content, list) else ():
        if block["type"] == "text":
            chars += len(block["text"])
        elif block["type"] == "toolCall":
            chars += len(block["name"]) + len(json.dumps(block["arguments"], separators=(",", ":")))
    if message.get("role") == "system":
        chars += sum(len(v) for v in (message.get("sections") or {}).values())
        if message.get("toolsAdded"):
            chars += len(json.dumps(message["toolsAdded"], separators=(",", ":")))
    return chars


def test_a_compaction_is_estimated_as_pi_estimates_the_context_it_leaves() -> None:
    """What pi 1.6.0 sends after compacting: its system message (the compaction's
    `systemMessage`), the summary, and every message from `firstKeptEntryId` on but the system
    messages, each at four characters a token."""
    records = _records("compact")
    at = next(i for i, r in enumerate(records) if r["type"] == "compaction")
    compaction = records[at]
    first = next(i for i, r in enumerate(records) if r.get("id") == compaction["firstKeptEntryId"])
    kept = [
        r["message"]
        for r in records[first:at]
        if r["type"] == "message" and r["message"]["role"] != "system"
    ]
    expected = math.ceil(len(compaction["summary"]) / 4)
    expected += math.ceil(_chars(compaction["systemMessage"]) / 4)
    expected += sum(math.ceil(_chars(m) / 4) for m in kept)
    updates = PiReader().feed((SESSIONS / "session.compact.jsonl").read_bytes())
    answers = [u for u in updates if not u.compaction]
    assert [u.tokens for u in answers] == _main_prompts("compact")
    assert {u.pending for u in answers} == {40}
    assert {u.reported_window for u in updates} == {200_000}
    (estimate,) = [u for u in updates if u.compaction]
    assert estimate.estimated
    assert estimate.tokens == expected
    assert estimate.tokens > 10_000  # the kept bash outputs, not the summary's few tokens


def _line(entry: dict[str, Any]) -> bytes:
    return orjson.dumps(entry) + b"\n"


def _answer(entry_id: str, prompt: int) -> bytes:
    usage = {"input": prompt, "output": 10, "cacheRead": 0, "cacheWrite": 0}
    message = {"role": "assistant", "content": [], "usage": usage | {"totalTokens": prompt + 10}}
    return _line({"type": "message", "id": entry_id, "message": message | {"model": "m"}})


def test_a_context_edit_moves_the_figure_by_what_it_dropped_or_replaced() -> None:
    result = {
        "role": "toolResult",
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "x" * 40_000}],
    }
    reader = PiReader()
    reader.feed(_line({"type": "message", "id": "r1", "message": result}) + _answer("a1", 50_000))
    # the 40,000-character result (10,000 tokens) replaced by a 40-character note
    note = {"content": [{"type": "text", "text": "n" * 40}]}
    (edited,) = reader.feed(
        _line({"type": "context_edit", "id": "e1", "targetId": "r1", "replacement": note})
    )
    assert (edited.tokens, edited.estimated, edited.turn_id) == (40_010, True, "a1")
    (dropped,) = reader.feed(
        _line({"type": "context_edit", "id": "e2", "targetId": "r1", "replacement": None})
    )
    assert dropped.tokens == 40_000
    unknown = {"type": "context_edit", "id": "e3", "targetId": "nowhere", "replacement": None}
    assert reader.feed(_line(unknown)) == []  # an entry never read: nothing to move
    # cache warming between runs: spending outside the conversation, no context
    warm = {
        "type": "usage",
        "id": "w1",
        "kind": "cache_warm",
        "provider": "anthropic",
        "model": "m",
        "usage": {"input": 0, "output": 0, "cacheRead": 50_000, "totalTokens": 50_000},
    }
    assert reader.feed(_line(warm)) == []
    (answered,) = reader.feed(_answer("a2", 41_000))  # the next answer says it again
    assert (answered.tokens, answered.estimated) == (41_000, False)
