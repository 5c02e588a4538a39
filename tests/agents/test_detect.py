"""str detection from a transcript's path (as hook payloads give it) and from its first bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxd.agents import AGENTS, detect_agent, detect_agent_from_path, spec
from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.agents.codex.transcript import CodexReader
from ctxd.agents.gemini.transcript import GeminiReader
from ctxd.errors import InvalidInput

DATA = Path(__file__).parents[1] / "data" / "transcripts"
_DIRS: dict[str, str] = {
    "claude-code-2.1.332": "claude",
    "claude-code-2.1.337": "claude",
    "claude-code-2.1.197": "claude",
    "gemini-cli-0.61.0": "gemini",
    "codex-cli-0.171.0": "codex",
    "qwen-code-0.24.4": "qwen",
    "pi-0.73.1": "pi",
    "pi-1.6.0": "pi",
    "copilot-1.0.102": "copilot",
    "kimi-code-2.1.0": "kimi",
}
SAMPLE_FILES = sorted((path, _DIRS[path.parent.name]) for path in DATA.glob("*/*.jsonl"))


@pytest.mark.parametrize(
    ("path", "agent"),
    [
        # transcript_path values from the samples' hook payloads ($SCRATCH kept as is).
        (
            "$SCRATCH/runs/compact/config/projects/$SCRATCH_SLUG-runs-compact-work/"
            "9e070809-0703-40e4-8d4f-8d358074cce3.jsonl",
            "claude",
        ),
        (
            "/home/u/.claude/projects/-home-u-src-app/9e070809-0703-40e4-8d4f-8d358074cce3.jsonl",
            "claude",
        ),
        (
            "$SCRATCH/runs/compact/config/projects/$SCRATCH_SLUG-runs-compact-work/"
            "9e070809-0703-40e4-8d4f-8d358074cce3/subagents/agent-a075576dd443f4b96.jsonl",
            "claude",
        ),
        (
            "$SCRATCH/runs/compress/home/.gemini/tmp/work/chats/"
            "session-2026-11-29T21-11-69ff20f4.jsonl",
            "gemini",
        ),
        (
            "$SCRATCH/runs/exec/codex/sessions/2026/11/29/"
            "rollout-2026-11-29T21-02-01-01a2291d-6417-76a0-b7ef-b874ab400d11.jsonl",
            "codex",
        ),
        ("/home/u/.codex/sessions/2026/11/29/rollout-x.json", None),  # not .jsonl
        ("/home/u/.codex/sessions/2026/Nov/29/rollout-x.jsonl", None),  # not a date
        ("/home/u/.gemini/tmp/work/chats/checkpoint-x.jsonl", None),
        ("/tmp/claude-ctx-9e070809.json", None),
        ("/var/log/app.jsonl", None),
        ("", None),
    ],
)
def test_detect_agent_from_path(path: str, agent: str | None) -> None:
    assert detect_agent_from_path(path) == agent


@pytest.mark.parametrize(("path", "agent"), SAMPLE_FILES, ids=lambda v: getattr(v, "name", v))
def test_detect_agent_from_the_head_of_every_sample(path: Path, agent: str) -> None:
    head = path.read_bytes()[:4096]

    assert detect_agent(head) == agent


def _first_line(name: str) -> bytes:
    return (DATA / name).read_bytes().split(b"\n", 1)[0]


def _nth_line_with(name: str, marker: bytes) -> bytes:
    return next(line for line in (DATA / name).read_bytes().split(b"\n") if marker in line)


@pytest.mark.parametrize(
    ("head", "agent"),
    [
        # A head too short for a long first line: Codex's session_meta is 22 KB.
        (_first_line("codex-cli-0.171.0/rollout.exec.jsonl")[:1000], "codex"),
        (_first_line("gemini-cli-0.61.0/transcript.print.1.jsonl")[:120], "gemini"),
        (
            _nth_line_with("claude-code-2.1.332/transcript.compact.jsonl", b'"parentUuid"')[:500],
            "claude",
        ),
        (_first_line("claude-code-2.1.332/transcript.compact.jsonl")[:110], "claude"),
    ],
)
def test_detect_agent_from_a_cut_off_first_line(head: bytes, agent: str) -> None:
    assert b"\n" not in head

    assert detect_agent(head) == agent


@pytest.mark.parametrize(
    "head", [b"", b"\n\n", b"hello world\n", b"[1,2,3]\n", b'{"foo": 1}\n', b"\xff\xfe\x00"]
)
def test_unknown_heads_give_none(head: bytes) -> None:
    assert detect_agent(head) is None


def test_each_agent_opens_its_own_fresh_reader() -> None:
    readers = {agent: spec(agent).open_reader(None) for agent in AGENTS}

    assert isinstance(readers["claude"], ClaudeReader)
    assert isinstance(readers["gemini"], GeminiReader)
    assert isinstance(readers["codex"], CodexReader)
    assert spec("claude").open_reader(None) is not spec("claude").open_reader(None)


def test_an_unknown_agent_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match="unknown agent 'cursor'; expected one of claude"):
        spec("cursor")


_PUBLIC = Path(__file__).parents[1] / "data" / "public" / "gemini" / "chats"
#: An older Gemini CLI recording: one indented object, 174 KB, its messages past any head.
_INDENTED = (_PUBLIC / "session-2026-03-kind.json").read_bytes()


@pytest.mark.parametrize(
    ("head", "agent"),
    [
        (_INDENTED, "gemini"),  # the whole document
        (_INDENTED[: 64 * 1024], "gemini"),  # cut inside its messages
        (_INDENTED[:200], "gemini"),  # cut after sessionId and projectHash
        (_INDENTED[:100], None),  # cut before projectHash: sessionId alone says nothing
        (b"\n  {\n" + _INDENTED.split(b"\n", 1)[1][:300], "gemini"),  # blank lines first
        (b'{\n  "foo": 1,\n  "bar": [1, 2]\n}\n', None),  # an indented object of no agent
        (b"{\n", None),
    ],
)
def test_detect_agent_from_an_object_spread_over_lines(head: bytes, agent: str | None) -> None:
    assert detect_agent(head) == agent
