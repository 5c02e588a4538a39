"""A reader tells its listener (the session digest) the records of the same pass over the lines
it reads usage from. Carrying the digest must not change a reader's usage updates, and the
digest must not depend on where the bytes were split. Claude's `saw_tool_use` keeps every call
of the newest turn."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from ctxd.agents import spec
from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.agents.digest import Facts
from ctxd.agents.reader import TranscriptReader
from ctxd.core.digest import Digest

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
SAMPLES = [
    ("claude", p) for p in sorted(DATA.glob("claude-code-*/*.jsonl")) if "subagents" not in p.parts
]
SAMPLES += [("codex", p) for p in sorted(DATA.glob("codex-cli-*/*.jsonl"))]
SAMPLES += [("gemini", p) for p in sorted(DATA.glob("gemini-cli-*/*.jsonl"))]
HOLDS_NO_FACT = {"transcript.compress.2.jsonl"}
PUBLIC = DATA.parent / "public"
PUBLIC_SAMPLES = [
    (agent, p)
    for agent in ("claude", "codex", "gemini")
    for p in sorted(PUBLIC.glob(f"{agent}/**/*.jsonl"))
]


def _with_facts(agent: str, path: Path) -> tuple[TranscriptReader, Facts]:
    """`agent`'s reader for `path` with the digest's facts as its listener."""
    agent_spec = spec(agent)
    facts = agent_spec.open_facts(str(path))
    assert facts is not None
    return agent_spec.open_reader(str(path), facts), facts


@pytest.mark.parametrize(("agent", "path"), SAMPLES, ids=lambda v: getattr(v, "name", v))
def test_a_reader_carrying_the_digest_reports_the_same_usage(agent: str, path: Path) -> None:
    data = path.read_bytes()
    alone = spec(agent).open_reader(str(path)).feed(data)
    riding, _ = _with_facts(agent, path)
    assert riding.feed(data) == alone
    split, _ = _with_facts(agent, path)
    assert [u for i in range(0, len(data), 7) for u in split.feed(data[i : i + 7])] == alone


@pytest.mark.parametrize(("agent", "path"), SAMPLES, ids=lambda v: getattr(v, "name", v))
@pytest.mark.parametrize("step", [1, 7, 4096])
def test_the_digest_does_not_depend_on_where_the_bytes_were_split(
    agent: str, path: Path, step: int
) -> None:
    data = path.read_bytes()
    whole, whole_facts = _with_facts(agent, path)
    whole.feed(data)
    pieces, pieces_facts = _with_facts(agent, path)
    for i in range(0, len(data), step):
        pieces.feed(data[i : i + step])
    assert pieces_facts.digest == whole_facts.digest
    # Every sample holds facts (the comparison is not of two empty digests), but the file
    # Gemini CLI starts after a compression, which holds only its context and the summary.
    assert (whole_facts.digest == Digest()) == (path.name in HOLDS_NO_FACT)


@pytest.mark.parametrize(
    ("agent", "path"), SAMPLES + PUBLIC_SAMPLES, ids=lambda v: getattr(v, "name", v)
)
def test_a_reader_told_to_do_no_usage_work_keeps_the_same_digest(agent: str, path: Path) -> None:
    """What `ctxd handoff` reads (the facts alone) is the digest the daemon keeps as it reads
    usage, fed whole or in pieces; and the reader reports no usage then."""
    data = path.read_bytes()
    riding, riding_facts = _with_facts(agent, path)
    riding.feed(data)
    agent_spec = spec(agent)
    for step in (len(data), 4096):
        facts = agent_spec.open_facts(str(path))
        assert facts is not None
        alone = agent_spec.open_reader(str(path), facts, usage=False)
        assert [u for i in range(0, len(data), step) for u in alone.feed(data[i : i + step])] == []
        assert facts.digest == riding_facts.digest


def _turn(message_id: str, call_ids: list[str]) -> bytes:
    """One assistant line per call, as Claude Code writes a turn's parallel calls."""
    lines = []
    for call_id in call_ids:
        record = {
            "parentUuid": None,
            "isSidechain": False,
            "type": "assistant",
            "message": {
                "id": message_id,
                "model": "claude-sonnet-4-5",
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "Read", "input": {}}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000},
            },
        }
        lines.append(orjson.dumps(record) + b"\n")
    return b"".join(lines)


def test_saw_tool_use_keeps_every_call_of_the_newest_turn_and_a_few_before() -> None:
    reader = ClaudeReader()
    for n in range(30):  # thirty turns of one call each
        reader.feed(_turn(f"msg_{n}", [f"toolu_{n}"]))
    assert reader.saw_tool_use("toolu_29")
    assert reader.saw_tool_use("toolu_14")  # the last 16 are kept
    assert not reader.saw_tool_use("toolu_13")
    parallel = [f"toolu_p{i}" for i in range(40)]  # one turn, forty parallel calls
    reader.feed(_turn("msg_parallel", parallel))
    assert all(reader.saw_tool_use(call_id) for call_id in parallel)
    reader.feed(_turn("msg_next", ["toolu_next"]))
    assert reader.saw_tool_use("toolu_next")
    assert reader.saw_tool_use("toolu_p39")
    assert not reader.saw_tool_use("toolu_p0")  # an older turn's: beyond the bound now


def _codex_rounds(rounds: int) -> bytes:
    """The Codex continuity capture `rounds` times over, ids and paths unique per round, each
    round's request and reply its own; every third request one of ctxd's own texts (not a
    request), every fourth reply empty."""
    lines = (DATA / "codex-cli-0.171.0" / "rollout.continuity.jsonl").read_bytes().splitlines()
    texts: dict[bytes, Callable[[int], str]] = {
        b'"item":{"type":"UserMessage"': lambda n: (
            "CONTEXT HANDOFF: x" if n % 3 == 1 else f"ask {n}"
        ),
        b'"item":{"type":"AgentMessage"': lambda n: " " if n % 4 == 2 else f"reply {n}",
    }
    out = []
    for n in range(rounds):
        for line in lines:
            for prefix in (b"call_mock", b"resp_mock", b"msg_mock", b"fc_mock", b"ctc_mock"):
                line = line.replace(prefix, prefix + f"r{n}_".encode())
            line = line.replace(b"app.py", f"app_{n % 7}.py".encode())
            for marker, text in texts.items():
                if marker in line:
                    record = orjson.loads(line)
                    record["payload"]["item"]["content"] = [{"type": "text", "text": text(n)}]
                    line = orjson.dumps(record)
            out.append(line + b"\n")
    return b"".join(out)


def _codex_digest(lines: list[bytes]) -> Digest:
    """The digest of a Codex rollout fed to its reader in the given pieces."""
    codex = spec("codex")
    facts = codex.open_facts(None)
    assert facts is not None
    reader = codex.open_reader(None, facts)
    for piece in lines:
        reader.feed(piece)
    return facts.digest


def _whole_and_by_line(data: bytes) -> tuple[Digest, Digest]:
    """The Codex digests of `data` fed whole and fed a line at a time."""
    return _codex_digest([data]), _codex_digest(data.splitlines(keepends=True))


@pytest.mark.parametrize("rounds", [1, 4, 13, 40])
def test_codex_digest_fed_whole_or_by_line_is_the_same(rounds: int) -> None:
    """Many commands, requests (some of them ctxd's own texts), replies (some blank) and todo
    lists: the same digest whether a feed holds one line or all of them."""
    whole, by_line = _whole_and_by_line(_codex_rounds(rounds))
    assert whole == by_line
    assert whole.commands_run == 4 * rounds
    assert whole.commands_failed == rounds
    assert whole.first_ask == "ask 0"


def _codex_odd_rounds(rounds: int) -> tuple[bytes, bytes]:
    """`_codex_rounds` with odd shapes: commands that fail with no id or no exit code, that
    read a file and exit 0, command items that do not decode, todo lists whose arguments are
    no JSON or no object; and the same without the lines that hold no fact (the items and todo
    lists that do not decode)."""
    out: list[bytes] = []
    clean: list[bytes] = []
    commands = plans = 0
    for line in _codex_rounds(rounds).splitlines():
        record = orjson.loads(line)
        if b'"item":{"type":"CommandExecution"' in line:
            commands += 1
            item = record["payload"]["item"]
            if commands % 5 == 3:
                item["id"], item["exit_code"], item["status"] = None, None, "failed"
                item["aggregated_output"] = "first\nwhy it failed\n\n"
            elif commands % 5 == 1:
                item["parsed_cmd"] = [{"type": "read", "cmd": "cat r.py", "name": f"r{commands}"}]
            elif commands % 5 == 2:
                out.append(line[: len(line) // 2])
        elif b'"name":"update_plan"' in line:
            plans += 1
            if plans % 3 == 0:
                record["payload"]["arguments"] = "{not json"
                out.append(orjson.dumps(record))
                continue
            if plans % 3 == 1:
                record["payload"]["arguments"] = "[1, 2]"
        out.append(orjson.dumps(record))
        clean.append(out[-1])
    return b"\n".join(out) + b"\n", b"\n".join(clean) + b"\n"


@pytest.mark.parametrize("rounds", [1, 4, 13, 40])
def test_codex_odd_items_fed_whole_or_by_line(rounds: int) -> None:
    """Fed whole or a line at a time: the digest of the lines that hold a fact."""
    data, clean = _codex_odd_rounds(rounds)
    whole, by_line = _whole_and_by_line(data)
    facts_only = _codex_digest(clean.splitlines(keepends=True))
    assert whole == by_line == facts_only
    assert whole.errors  # the failures without an id
    assert whole.todos is not None
