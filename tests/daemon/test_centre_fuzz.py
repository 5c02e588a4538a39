"""No request blinds the daemon: hook requests with fuzzed payloads and headers (the `env` among
them: NUL bytes, huge values, wrong types, odd unicode, nested garbage), answered by the daemon's
centre in process while several sessions are live on real transcript files.

Each request is answered or refused with a clear message (an `InvalidInput`, which the server
sends back as an error answer), never with another exception; after it, `ctxd status` still
lists every live session with the figure its transcript says. The requests name sessions and
transcripts of their own, never the live ones: a well-formed hook of a live session may rightly
change its figures.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock
from usage_lines import claude_assistant

from ctxd import agents
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings
from ctxd.errors import CtxdError
from ctxd.protocol import resolve

DATA = Path(__file__).resolve().parents[1] / "data"
LINES: dict[str, Any] = json.loads((DATA / "daemon" / "lines.json").read_text())
PAYLOADS = DATA / "payloads" / "claude" / "2.1.332"
EVENTS = ["PostToolUse", "UserPromptSubmit", "Stop", "SessionStart", "SessionEnd", "PreCompact"]
#: The live sessions' figures: one per project folder.
LIVE_TOKENS = [12_000, 150_000, 420_000, 910_000]
#: The longest refusal worth a log line; a message that echoes a huge value is not clear.
MAX_REFUSAL = 400


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _assistant(session_id: str, tokens: int) -> bytes:
    return claude_assistant(session_id, tokens, timestamp="2027-01-15T08:00:00Z")


def _live_centre(tmp_path: Path) -> tuple[Centre, dict[str, int]]:
    """A centre with len(LIVE_TOKENS) Claude sessions followed, each in its own project."""
    home = tmp_path / "home"
    projects = home / ".claude" / "projects"
    env = {
        "HOME": str(home),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
    }
    centre = Centre.open(
        env, {"claude": projects}, FakeClock(), monotonic=lambda: 0.0, settings=parse_settings("")
    )
    live: dict[str, int] = {}
    template = json.loads((PAYLOADS / "print" / "04-PostToolUse.json").read_text())
    for i, tokens in enumerate(LIVE_TOKENS):
        sid = str(uuid.uuid4())
        path = projects / f"-work-live{i}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(_assistant(sid, tokens))
        payload = dict(template, session_id=sid, transcript_path=str(path), cwd=str(tmp_path))
        payload.pop("tool_use_id", None)  # judged at once, not after waiting for its turn
        centre.answers.handle_hook("claude", None, json.dumps(payload).encode())
        live[str(path)] = tokens
    # A transcript of garbage the requests may name: its reader meets it too.
    junk = projects / "-work-junk" / "junk.jsonl"
    junk.parent.mkdir()
    junk.write_bytes(b'{"type": "assistant", "message": [1, {"usage": "x"}]}\n\x00\xff\n{{{\n')
    return centre, live


# ----------------------------------------------------------------------------- strategies

ODD_TEXT = st.sampled_from(
    [
        "",
        "\x00",
        "a\x00b",
        "/tmp/x\x00.jsonl",
        "\ud800",  # a lone surrogate: not encodable as UTF-8
        "\u202e\u0301\ufeff\U0010ffff",
        "../../etc/passwd",
        "~",
        "x" * 100_000,
        "/" + "d/" * 3000 + "t.jsonl",
        "null",
        "1e999",
    ]
)
TEXT = st.one_of(ODD_TEXT, st.text(max_size=40))
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
GARBAGE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
CONFIG_ENV = sorted({name for agent in agents.AGENTS for name in agents.spec(agent).config_env})
ENV = st.one_of(
    GARBAGE,
    st.dictionaries(st.one_of(st.sampled_from(CONFIG_ENV), TEXT), GARBAGE, max_size=6),
)


@st.composite
def hook_payloads(draw: st.DrawFn, tmp_path: Path) -> dict[str, Any]:
    """A hook-shaped object whose fields are drawn from garbage and from values of their type;
    its session and transcript are never a live session's."""
    template = json.loads((PAYLOADS / "print" / "04-PostToolUse.json").read_text())
    junk = str(tmp_path / "home" / ".claude" / "projects" / "-work-junk" / "junk.jsonl")
    fields: dict[str, Any] = {
        "session_id": _mostly(st.uuids().map(str), GARBAGE),
        "transcript_path": st.one_of(st.just(junk), GARBAGE),
        "cwd": GARBAGE,
        "hook_event_name": st.one_of(st.sampled_from(EVENTS), GARBAGE),
        "tool_use_id": GARBAGE,
        "model": GARBAGE,
        "source": GARBAGE,
        "agent_id": GARBAGE,
        "agent_transcript_path": GARBAGE,
        "context_tokens": GARBAGE,
        "stop_hook_active": GARBAGE,
        "to_model": GARBAGE,
        "context_window": GARBAGE,
        "cost": GARBAGE,
    }
    payload = dict(template)
    for name, values in fields.items():
        choice = draw(st.sampled_from(["keep", "drop", "fuzz"]))
        if choice == "drop":
            payload.pop(name, None)
        elif choice == "fuzz" or name in ("session_id", "transcript_path"):
            payload[name] = draw(values)
    return payload


class Fuzzed(tuple[object, object, bytes, object]):
    """(agent, event, payload, env), shown clipped: a failing example may hold huge values."""

    def __repr__(self) -> str:
        return "Fuzzed(" + ", ".join(_clip(repr(part)) for part in self) + ")"


def _clip(text: str, most: int = 300) -> str:
    return text if len(text) <= most else f"{text[:most]}...<{len(text):,} chars>"


def _mostly(usual: st.SearchStrategy[Any], other: st.SearchStrategy[Any]) -> Any:
    """`usual` nine times in ten, `other` the tenth."""
    return st.integers(0, 9).flatmap(lambda n: other if n == 0 else usual)


def _encode(value: Any) -> bytes:
    return json.dumps(value).encode()  # ASCII: a lone surrogate is escaped, not an error


@st.composite
def requests(draw: st.DrawFn, tmp_path: Path) -> Fuzzed:
    """(agent, event, payload bytes, env) as a hook request's header and body carry them."""
    # Mostly requests that get past the first checks, so that the deeper ones are fuzzed too.
    agent = draw(_mostly(st.sampled_from(agents.AGENTS), GARBAGE))
    event = draw(_mostly(st.sampled_from([None, *EVENTS, "statusline"]), GARBAGE))
    payload = draw(
        _mostly(
            hook_payloads(tmp_path).map(_encode),
            st.one_of(
                GARBAGE.map(_encode),
                st.binary(max_size=64),
                st.sampled_from([b"", b"{", b'{"session_id": "a"}\x00', b"\xff\xfe{}"]),
            ),
        )
    )
    env = draw(_mostly(ENV, st.none()))
    # The header is JSON: what it holds is what JSON gives back.
    header = json.loads(_encode({"agent": agent, "event": event, "env": env}))
    return Fuzzed((header["agent"], header["event"], payload, header["env"]))


# ----------------------------------------------------------------------------- the test


def test_no_request_blinds_status_or_refuses_unclearly(tmp_path: Path) -> None:
    centre, live = _live_centre(tmp_path)

    def answer(agent: object, event: object, payload: bytes, env: object) -> bytes:
        # As the daemon's hook handler passes the header on (`lifecycle.Daemon._answer_hook`).
        answer = centre.answers.handle_hook(str(agent), str(event) if event else None, payload, env)
        if isinstance(answer, bytes):
            return answer
        # A wait for the agent's turn: virtual seconds, none real.
        clock = MockClock(autojump_threshold=0)
        return anyio.run(resolve, answer, backend="trio", backend_options={"clock": clock})

    @settings(
        max_examples=200,  # about 4 s: part of the quick suite
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(request=requests(tmp_path))
    def one(request: Fuzzed) -> None:
        try:
            out = answer(*request)
        except CtxdError as exc:
            message = str(exc)
            assert message and "\n" not in message and len(message) <= MAX_REFUSAL, message
        else:
            if request[1] == "statusline":  # a line for the agent's status bar
                assert out.decode().count("\n") <= 1, out
            else:  # the hook's JSON, or nothing
                assert out == b"" or isinstance(json.loads(out), dict), out
        doc = centre.status.document()
        rows = {row["transcript_path"]: row for row in doc["sessions"]}
        for path, tokens in live.items():
            assert "error" not in rows[path], rows[path]
            assert rows[path]["tokens"] == tokens
        assert not [row for row in doc["sessions"] if "error" in row]

    one()
