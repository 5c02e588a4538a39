"""Kimi Code's session digest: from the real 2.1.0 capture, and a failed Bash call's outcome."""

from __future__ import annotations

import json
from pathlib import Path

from ctxd import agents
from ctxd.agents.kimi.digest import KimiFacts

WIRE = Path(__file__).parents[2] / "data" / "transcripts" / "kimi-code-2.1.0" / "wire.compact.jsonl"


def test_the_capture_gives_the_users_requests_the_command_and_the_compaction() -> None:
    spec = agents.spec("kimi")
    facts = spec.open_facts(str(WIRE))
    assert isinstance(facts, KimiFacts)
    spec.open_reader(str(WIRE), facts).feed(WIRE.read_bytes())
    digest = facts.digest
    # the Stop hook's turn ("KIMI-CAPTURE-BLOCK") is a system turn, not a request
    assert digest.asks == ("Run echo hello", "Say something big", "Say something small")
    assert [c.text for c in digest.commands] == ["echo hello"]
    assert digest.commands[0].failed is False
    assert digest.compactions == 1
    assert digest.last_reply == "After the compaction."


def _loop(event: object) -> dict[str, object]:
    return {"type": "context.append_loop_event", "agentId": "main", "event": event}


def test_a_failed_command_and_a_subagents_records() -> None:
    facts = KimiFacts()
    call = {"type": "tool.call", "toolCallId": "c1", "name": "Bash", "args": {"command": "make"}}
    output = "boom\nProcess exited with code 2\nCommand failed with exit code: 2."
    result = {
        "type": "tool.result",
        "toolCallId": "c1",
        "result": {"output": output, "isError": True},
    }
    read = {"type": "tool.call", "toolCallId": "c2", "name": "Read", "args": {"path": "/a.py"}}
    missing = {
        "type": "tool.result",
        "toolCallId": "c2",
        "result": {"output": "No such file: /a.py", "isError": True},
    }
    for record in (_loop(call), _loop(result), _loop(read), _loop(missing)):
        facts.take(json.loads(json.dumps(record)))
    facts.take(
        {
            "type": "turn.prompt",
            "agentId": "sub_1",
            "input": "not the session's",
            "origin": {"kind": "user"},
        }
    )
    digest = facts.digest
    (command,) = digest.commands
    assert (command.failed, command.exit_code) == (True, 2)
    assert digest.errors == ("Read: No such file: /a.py",)
    assert [f.path for f in digest.files] == ["/a.py"]
    assert digest.asks == ()
