"""pi: its sessions read from the real 0.73.1 captures (tests/data/transcripts/pi-0.73.1/), its
compaction rule, its extension's payloads, and `ctxd install pi` as a document transformation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxd import agents
from ctxd.agents.pi import files, install
from ctxd.agents.pi.compaction import compaction_point, settings_config
from ctxd.agents.pi.transcript import PiReader
from ctxd.cli.replay import Row, replay
from ctxd.core.events import Reply

DATA = Path(__file__).parents[2] / "data"
SESSIONS = DATA / "transcripts" / "pi-0.73.1"
PAYLOADS = DATA / "payloads" / "pi" / "0.73.1"
EXTENSION = "/home/u/.local/share/ctxd/client/pi/ctxd.ts"


def _main_prompts(scenario: str) -> list[int]:
    usage = json.loads((SESSIONS / f"usage.{scenario}.json").read_text())
    return [u["usage"]["prompt_tokens"] for u in usage if u["kind"] == "main"]


@pytest.mark.parametrize("scenario", ["print", "compact"])
def test_the_figures_are_the_prompts_the_mock_reported(scenario: str) -> None:
    reader = PiReader()
    updates = reader.feed((SESSIONS / f"session.{scenario}.jsonl").read_bytes())
    answers = [u for u in updates if not u.compaction]
    assert [u.tokens for u in answers] == _main_prompts(scenario)
    assert {u.pending for u in answers} == {40}  # the output, which pi's totalTokens adds
    assert {u.reported_window for u in updates} == {200_000}  # the extension's ctxd entry
    assert {u.model for u in answers} == {"mock-model"}


def test_a_compaction_entry_is_a_compaction_with_an_estimate() -> None:
    updates = PiReader().feed((SESSIONS / "session.compact.jsonl").read_bytes())
    marks = [(u.tokens, u.compaction, u.estimated) for u in updates]
    # pi's own estimate after a compaction (four characters a token, rounded up per message):
    # the summary, 3, and what it kept from `firstKeptEntryId` (the model change) on: the
    # prompt (13 characters), the bash call (29), its result (29) and the answer (5), 22
    assert marks == [
        (12_000, False, False),
        (190_000, False, False),
        (3 + 22, True, True),
        (30_000, False, False),
        (31_000, False, False),
    ]


def test_split_anywhere_gives_the_same_updates() -> None:
    data = (SESSIONS / "session.compact.jsonl").read_bytes()
    whole = PiReader().feed(data)
    for cut in range(0, len(data), 97):
        reader = PiReader()
        assert reader.feed(data[:cut]) + reader.feed(data[cut:]) == whole


def test_the_reader_knows_the_tool_calls_it_read() -> None:
    payload = json.loads((PAYLOADS / "print" / "02-tool_result.json").read_text())
    reader = PiReader()
    assert not reader.saw_tool_use(payload["tool_use_id"])
    reader.feed((SESSIONS / "session.print.jsonl").read_bytes())
    assert reader.saw_tool_use(payload["tool_use_id"])
    assert reader.saw_answer()  # the last answer made no calls


def test_the_layout_and_the_header_say_pi() -> None:
    path = (
        "/home/u/.pi/agent/sessions/--home-u-src-app--/"
        "2026-12-01T22-31-40-204Z_01a233bc-2dab-745f-bff0-c44edd0e9fdd.jsonl"
    )
    assert agents.detect_agent_from_path(path) == "pi"
    assert files.session_id_from_path(path) == "01a233bc-2dab-745f-bff0-c44edd0e9fdd"
    assert not files.has_layout("/home/u/.pi/agent/sessions/--x--/notes.jsonl")
    head = (SESSIONS / "session.print.jsonl").read_bytes()[:300]
    assert agents.detect_agent(head) == "pi"
    assert agents.detect_agent(head[:40]) == "pi"  # a first line cut short
    env = {"HOME": "/home/u"}
    assert files.transcript_root(env) == Path("/home/u/.pi/agent/sessions")
    assert files.transcript_root({**env, "PI_CODING_AGENT_DIR": "~/pi"}) == Path(
        "/home/u/pi/sessions"
    )


@pytest.mark.parametrize(
    ("window", "settings", "point"),
    [
        (200_000, {}, 183_617),  # over window - 16,384
        (1_000_000, {}, 983_617),
        (200_000, {"compaction": {"reserveTokens": 50_000}}, 150_001),
        (200_000, {"compaction": {"reserveTokens": "lots"}}, 183_617),
        (200_000, {"compaction": {"enabled": False}}, None),
        (200_000, {"compaction": {"enabled": True}}, 183_617),
        (10_000, {}, 1),
    ],
)
def test_the_compaction_rule(window: int, settings: dict[str, object], point: int | None) -> None:
    assert compaction_point(window, None, {}, settings_config(settings)) == point


@pytest.mark.parametrize("scenario", ["print", "compact"])
def test_every_captured_payload_parses(scenario: str) -> None:
    for path in sorted((PAYLOADS / scenario).glob("*.json")):
        event = agents.parse("pi", path.read_bytes())
        name = path.stem.partition("-")[2]
        assert event.name == name
        assert event.kind == agents.spec("pi").dialect.event_kind(name, None)
        assert event.session_id and event.transcript_path and event.cwd


def test_the_answers_the_extension_reads() -> None:
    tool = agents.parse("pi", (PAYLOADS / "print" / "02-tool_result.json").read_bytes())
    assert tool.kind == "tool_call" and tool.tool_use_id
    assert json.loads(agents.render(tool, Reply(context="CONTEXT WARNING: x"))) == {
        "hookSpecificOutput": {
            "hookEventName": "tool_result",
            "additionalContext": "CONTEXT WARNING: x",
        }
    }
    end = agents.parse("pi", (PAYLOADS / "print" / "05-agent_end.json").read_bytes())
    assert end.kind == "stop"
    assert json.loads(agents.render(end, Reply(user_message="CONTEXT HANDOFF: y"))) == {
        "systemMessage": "CONTEXT HANDOFF: y"
    }
    assert json.loads(agents.render(end, Reply(block_reason="write it"))) == {
        "decision": "block",
        "reason": "write it",
    }


def test_install_is_idempotent_and_reversible_and_keeps_the_users_extensions() -> None:
    doc = {"theme": "dark", "extensions": ["/home/u/mine.ts"]}
    once, _ = install.install(doc, EXTENSION)
    assert once == {"theme": "dark", "extensions": ["/home/u/mine.ts", EXTENSION]}
    assert install.install(once, EXTENSION)[0] == once
    assert install.uninstall(once)[0] == doc
    assert install.uninstall(doc)[0] == doc
    # an older copy's path is replaced, and a list only ctxd filled goes with it
    moved, _ = install.install({"extensions": ["/old/ctxd/client/pi/ctxd.ts"]}, EXTENSION)
    assert moved == {"extensions": [EXTENSION]}
    assert install.uninstall(moved)[0] == {}
    assert install.install({}, EXTENSION)[0] == {"extensions": [EXTENSION]}


def test_doctor_says_whether_the_extension_is_there(tmp_path: Path) -> None:
    (ext := tmp_path / "ctxd" / "client" / "pi" / "ctxd.ts").parent.mkdir(parents=True)
    assert not install.checks({"extensions": [str(ext)]})[0].ok  # listed, file missing
    ext.write_text("export default () => {}\n")
    assert install.checks({"extensions": [str(ext)]})[0].ok
    assert install.checks({})[0].skipped  # not installed: not a failure
    assert not install.checks({"extensions": "x"})[0].ok


def test_replay_of_a_captured_session() -> None:
    rows = [r for r in replay(str(SESSIONS / "session.compact.jsonl")) if isinstance(r, Row)]
    assert rows[-1].figures.tokens == _main_prompts("compact")[-1] == 31_000
    assert (rows[-1].figures.window.size, rows[-1].figures.window.source) == (200_000, "agent")
    assert rows[-1].figures.compaction_at == 183_617
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", str(SESSIONS / "session.print.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert '"pi"' in out and "16500" in out, out


def test_the_digest_of_a_session() -> None:
    from ctxd.agents.pi.digest import PiFacts

    def message(entry_id: str, message: dict[str, object]) -> bytes:
        record = {"type": "message", "id": entry_id, "parentId": None, "message": message}
        return json.dumps(record).encode() + b"\n"

    calls = [
        {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/a.py"}},
        {"type": "toolCall", "id": "c2", "name": "edit", "arguments": {"path": "src/a.py"}},
        {"type": "toolCall", "id": "c3", "name": "bash", "arguments": {"command": "make test"}},
    ]
    failed = "boom\n\nCommand exited with code 2"
    said: dict[str, object] = {
        "role": "assistant",
        "content": [{"type": "text", "text": "On it."}, *calls],
    }
    result: dict[str, object] = {
        "role": "toolResult",
        "toolCallId": "c3",
        "toolName": "bash",
        "isError": True,
    }
    result["content"] = [{"type": "text", "text": failed}]
    compaction = {"type": "compaction", "id": "k1", "summary": "S", "tokensBefore": 9}
    data = (SESSIONS / "session.print.jsonl").read_bytes() + b"".join(
        [
            message("u1", {"role": "user", "content": "Fix the tests"}),
            message("a1", said),
            message("r3", result),
            json.dumps(compaction).encode() + b"\n",
        ]
    )
    facts = PiFacts()
    PiReader(facts).feed(data)
    digest = facts.digest
    assert digest.first_ask == "Run the steps"
    assert digest.compactions == 1
    assert [(f.path, f.reads, f.edits) for f in digest.files] == [("src/a.py", 1, 1)]
    last = digest.commands[-1]
    assert (last.text, last.failed, last.exit_code) == ("make test", True, 2)
    assert [c.text for c in digest.commands[:3]] == ["echo step 0", "echo step 1", "echo step 2"]
