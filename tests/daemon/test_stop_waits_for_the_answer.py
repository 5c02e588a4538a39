"""A Stop hook is judged on the answer that ended the turn. An agent that queues its transcript
writes (Qwen Code) can run Stop before that answer is on disk; the daemon then waits for it (at
most TOOL_CALL_WAIT) instead of judging the previous answer's figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxd.daemon.centre import Centre

DATA = Path(__file__).parents[1] / "data"
TRANSCRIPT = DATA / "transcripts" / "qwen-code-0.24.4" / "transcript.print.jsonl"
STOP = DATA / "payloads" / "qwen" / "0.24.4" / "print" / "16-Stop.json"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _first_final_answer(lines: list[bytes]) -> int:
    """The answer that ended the capture's first turn (the one Stop 16 fired for)."""
    for index, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "assistant" and "functionCall" not in line.decode():
            return index
    raise AssertionError("no final answer in the capture")


async def test_a_stop_before_the_final_answer_is_written_waits_for_it(tmp_path: Path) -> None:
    root = tmp_path / ".qwen" / "projects"
    path = root / "-work" / "chats" / "s.jsonl"
    path.parent.mkdir(parents=True)
    lines = [line for line in TRANSCRIPT.read_bytes().splitlines(keepends=True) if line.strip()]
    final = _first_final_answer(lines)
    path.write_bytes(b"".join(lines[:final]))  # everything but the answer that ends the turn
    payload = json.loads(STOP.read_text())
    payload["transcript_path"] = str(path)
    payload["stop_hook_active"] = False
    centre = Centre.open({"HOME": str(tmp_path)}, {"qwen": root})

    answer = centre.answers.handle_hook("qwen", None, json.dumps(payload).encode())

    assert not isinstance(answer, bytes), "answered from the previous answer's figure"
    expected = json.loads(lines[final])["usageMetadata"]["promptTokenCount"]
    with path.open("ab") as f:  # the agent's queued write lands
        f.write(lines[final])
    await answer
    (state,) = centre.sessions
    assert state.tokens == expected


async def test_a_stop_after_the_answer_is_on_disk_is_answered_at_once(tmp_path: Path) -> None:
    root = tmp_path / ".qwen" / "projects"
    path = root / "-work" / "chats" / "s.jsonl"
    path.parent.mkdir(parents=True)
    lines = [line for line in TRANSCRIPT.read_bytes().splitlines(keepends=True) if line.strip()]
    path.write_bytes(b"".join(lines[: _first_final_answer(lines) + 1]))
    payload = json.loads(STOP.read_text())
    payload["transcript_path"] = str(path)
    payload["stop_hook_active"] = False
    centre = Centre.open({"HOME": str(tmp_path)}, {"qwen": root})

    answer = centre.answers.handle_hook("qwen", None, json.dumps(payload).encode())
    assert isinstance(answer, bytes)  # an answer, not an awaitable that waits for a write
