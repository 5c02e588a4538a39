"""Whatever arrives on a hook's stdin, parse_hook answers with an event or InvalidInput."""

from __future__ import annotations

import contextlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxd.agents import AGENTS
from ctxd.agents import parse as parse_hook
from ctxd.agents.hooks import MAX_PAYLOAD_BYTES
from ctxd.errors import InvalidInput

GOOD = {"session_id": "abc-123", "hook_event_name": "PostToolUse", "transcript_path": "/t.jsonl"}


def _with(**changes: object) -> bytes:
    payload: dict[str, object] = {**GOOD, **changes}
    return orjson.dumps({k: v for k, v in payload.items() if v is not None})


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "not JSON"),
        (b"PostToolUse fired", "not JSON"),
        (b'{"session_id": "abc"', "not JSON"),
        (b"\xff\xfe{}", "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'"session_id"', "not a JSON object"),
        (b"null", "not a JSON object"),
        (_with(session_id=None), "no session_id"),
        (_with(session_id=""), "no session_id"),
        (_with(session_id=42), "no session_id"),
        (_with(session_id="../../etc/passwd"), "not a plain token"),
        (_with(session_id="/etc/passwd"), "not a plain token"),
        (_with(session_id="a b"), "not a plain token"),
        (_with(session_id="abc\n"), "not a plain token"),
        (_with(session_id="x" * 129), "not a plain token"),
        (_with(hook_event_name=None), "names no event"),
        (_with(hook_event_name='Stop"}'), "not a plain identifier"),
        (_with(hook_event_name="Post ToolUse"), "not a plain identifier"),
    ],
)
def test_unusable_payload_is_invalid_input(payload: bytes, reason: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_hook("claude", payload)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_128_character_session_id_is_accepted() -> None:
    assert parse_hook("codex", _with(session_id="a" * 128)).session_id == "a" * 128


def test_event_hint_must_be_an_identifier_too() -> None:
    with pytest.raises(InvalidInput, match="not a plain identifier"):
        parse_hook("gemini", _with(hook_event_name=None), event_hint="../x")


def test_huge_garbage_is_refused_without_parsing() -> None:
    garbage = b"{" * (MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(InvalidInput, match="larger than"):
        parse_hook("claude", garbage)


def test_deeply_nested_json_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        parse_hook("claude", b"[" * 5000 + b"]" * 5000)


def test_a_large_real_tool_response_still_parses() -> None:
    event = parse_hook("claude", _with(tool_response={"stdout": "x" * 1_000_000}))
    assert event.kind == "tool_call"


@settings(max_examples=300, deadline=None)
@given(agent=st.sampled_from(AGENTS), payload=st.binary(max_size=256))
def test_arbitrary_bytes_give_an_event_or_invalid_input(agent: str, payload: bytes) -> None:
    with contextlib.suppress(InvalidInput):
        parse_hook(agent, payload)


# What orjson can write: 64-bit integers, finite floats, strings without lone surrogates.
_text = st.text(st.characters(exclude_categories=["Cs"]))
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | st.sampled_from(["abc", "a-1.B_2", "PostToolUse", "Stop", "compact", "../x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(
    agent=st.sampled_from(AGENTS),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "session_id",
                "hook_event_name",
                "transcript_path",
                "cwd",
                "stop_hook_active",
                "source",
                "trigger",
                "reason",
                "model",
                "agent_id",
                "agent_transcript_path",
            ]
        ),
        _json,
    ),
)
def test_arbitrary_field_values_give_an_event_or_invalid_input(
    agent: str, fields: dict[str, object]
) -> None:
    try:
        event = parse_hook(agent, orjson.dumps(fields))
    except InvalidInput:
        return
    # Whatever got through is usable as a key and as text.
    assert event.session_id == fields["session_id"]
    for value in (event.transcript_path, event.cwd, event.source, event.model, event.agent_id):
        assert value is None or (isinstance(value, str) and value)
