"""render_reply gives, per agent and event, exactly the JSON that agent accepted in real runs.

The accepted shapes are the ones the harness capture hooks printed and whose effect was seen in
the next model request (harness scenarios/*.hooks.json and samples/*/report.md):
- Claude Code 2.1.x: hookSpecificOutput.additionalContext on PostToolUse, UserPromptSubmit and
  SessionStart, and (2.1.332) PostToolUseFailure; Stop {"decision":"block","reason"};
  systemMessage shown to the user.
- Gemini CLI 0.61.0: additionalContext on AfterTool, BeforeAgent, SessionStart; AfterAgent
  {"decision":"deny","reason"}.
- Codex CLI 0.171.0: additionalContext on PostToolUse, UserPromptSubmit, SessionStart; Stop
  {"decision":"block","reason"}.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxd.agents import parse as parse_hook
from ctxd.agents import render as render_reply
from ctxd.core.events import HookEvent, Reply

PAYLOADS = Path(__file__).parents[1] / "data" / "payloads"

# One real payload per agent and event.
SAMPLE = {
    ("claude", "SessionStart"): "claude/2.1.332/print/01-SessionStart.startup.json",
    ("claude", "UserPromptSubmit"): "claude/2.1.332/print/02-UserPromptSubmit.json",
    ("claude", "PreToolUse"): "claude/2.1.332/print/03-PreToolUse.json",
    ("claude", "PostToolUse"): "claude/2.1.332/print/04-PostToolUse.json",
    ("claude", "PostToolUseFailure"): "claude/2.1.332/failure/04-PostToolUseFailure.json",
    ("claude", "Stop"): "claude/2.1.332/print/07-Stop.json",
    ("claude", "SubagentStop"): "claude/2.1.332/compact/16-SubagentStop.json",
    ("claude", "PreCompact"): "claude/2.1.332/compact/15-PreCompact.auto.json",
    ("claude", "PostCompact"): "claude/2.1.332/compact/25-PostCompact.manual.json",
    ("claude", "Notification"): "claude/2.1.332/interactive/04-Notification.permission_prompt.json",
    ("claude", "SessionEnd"): "claude/2.1.332/print/09-SessionEnd.other.json",
    ("gemini", "SessionStart"): "gemini/0.61.0/print/01-SessionStart.startup.json",
    ("gemini", "BeforeAgent"): "gemini/0.61.0/print/02-BeforeAgent.json",
    ("gemini", "PreCompress"): "gemini/0.61.0/print/03-PreCompress.auto.json",
    ("gemini", "BeforeTool"): "gemini/0.61.0/print/04-BeforeTool.json",
    ("gemini", "AfterTool"): "gemini/0.61.0/print/05-AfterTool.json",
    ("gemini", "AfterAgent"): "gemini/0.61.0/print/10-AfterAgent.json",
    ("gemini", "Notification"): "gemini/0.61.0/interactive/05-Notification.ToolPermission.json",
    ("gemini", "SessionEnd"): "gemini/0.61.0/print/14-SessionEnd.exit.json",
    ("codex", "SessionStart"): "codex/0.171.0/exec/01-SessionStart.startup.json",
    ("codex", "UserPromptSubmit"): "codex/0.171.0/exec/02-UserPromptSubmit.json",
    ("codex", "PreToolUse"): "codex/0.171.0/exec/03-PreToolUse.json",
    ("codex", "PostToolUse"): "codex/0.171.0/exec/04-PostToolUse.json",
    ("codex", "Stop"): "codex/0.171.0/exec/09-Stop.json",
    ("codex", "PreCompact"): "codex/0.171.0/autocompact_limit/05-PreCompact.auto.json",
    ("codex", "PostCompact"): "codex/0.171.0/autocompact_limit/06-PostCompact.auto.json",
    ("codex", "SessionEnd"): "codex/0.171.0/exec/11-SessionEnd.other.json",
}
STOP_HOOK_ACTIVE = {
    "claude": "claude/2.1.332/print/08-Stop.stop_hook_active.json",
    "gemini": "gemini/0.61.0/print/13-AfterAgent.stop_hook_active.json",
    "codex": "codex/0.171.0/exec/10-Stop.stop_hook_active.json",
}

C, U, B = "ctx: usage at 70%", "ctxd: 70% of the window used", "hand off now, please"
ALL = Reply(context=C, user_message=U, block_reason=B)


def _ctx(name: str) -> dict[str, object]:
    return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": C}}


BLOCK: dict[str, object] = {"decision": "block", "reason": B}
DENY: dict[str, object] = {"decision": "deny", "reason": B}
SHOWN: dict[str, object] = {"systemMessage": U}

# The whole truth table for Reply(context, user_message, block_reason) on every event seen.
EXPECTED_ALL: dict[tuple[str, str], dict[str, object] | None] = {
    ("claude", "SessionStart"): {**_ctx("SessionStart"), **SHOWN},
    ("claude", "UserPromptSubmit"): {**_ctx("UserPromptSubmit"), **SHOWN},
    ("claude", "PreToolUse"): SHOWN,
    ("claude", "PostToolUse"): {**_ctx("PostToolUse"), **SHOWN},
    ("claude", "PostToolUseFailure"): {**_ctx("PostToolUseFailure"), **SHOWN},
    ("claude", "Stop"): {**BLOCK, **SHOWN},
    ("claude", "SubagentStop"): SHOWN,
    ("claude", "PreCompact"): SHOWN,
    ("claude", "PostCompact"): SHOWN,
    ("claude", "Notification"): SHOWN,
    ("claude", "SessionEnd"): None,
    ("gemini", "SessionStart"): {**_ctx("SessionStart"), **SHOWN},
    ("gemini", "BeforeAgent"): {**_ctx("BeforeAgent"), **SHOWN},
    ("gemini", "PreCompress"): SHOWN,
    ("gemini", "BeforeTool"): SHOWN,
    ("gemini", "AfterTool"): {**_ctx("AfterTool"), **SHOWN},
    ("gemini", "AfterAgent"): {**DENY, **SHOWN},
    ("gemini", "Notification"): SHOWN,
    ("gemini", "SessionEnd"): SHOWN,
    ("codex", "SessionStart"): {**_ctx("SessionStart"), **SHOWN},
    ("codex", "UserPromptSubmit"): {**_ctx("UserPromptSubmit"), **SHOWN},
    ("codex", "PreToolUse"): SHOWN,
    ("codex", "PostToolUse"): {**_ctx("PostToolUse"), **SHOWN},
    ("codex", "Stop"): {**BLOCK, **SHOWN},
    ("codex", "PreCompact"): SHOWN,
    ("codex", "PostCompact"): SHOWN,
    ("codex", "SessionEnd"): None,
}


def _event(relpath: str) -> HookEvent:
    agent = relpath.split("/", 1)[0]
    return parse_hook(agent, (PAYLOADS / relpath).read_bytes())


def _rendered(event: HookEvent, reply: Reply) -> object:
    out = render_reply(event, reply)
    return orjson.loads(out) if out else None


def test_truth_table_covers_every_sample() -> None:
    assert set(EXPECTED_ALL) == set(SAMPLE)


@pytest.mark.parametrize("key", sorted(SAMPLE), ids="/".join)
def test_full_reply_renders_what_the_agent_accepts(key: tuple[str, str]) -> None:
    event = _event(SAMPLE[key])
    assert event.name == key[1]
    assert _rendered(event, ALL) == EXPECTED_ALL[key]


# The exact envelopes the capture hooks printed in the harness runs that were seen to work.
@pytest.mark.parametrize(
    ("key", "reply", "accepted"),
    [
        (
            ("claude", "PostToolUse"),
            Reply(context="CTX-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": "CTX-MARKER",
                }
            },
        ),
        (
            ("claude", "SessionStart"),
            Reply(context="SESSIONSTART-ADDITIONAL-CONTEXT"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": "SESSIONSTART-ADDITIONAL-CONTEXT",
                }
            },
        ),
        (
            ("claude", "UserPromptSubmit"),
            Reply(context="PROMPTSUBMIT-ADDITIONAL-CONTEXT"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": "PROMPTSUBMIT-ADDITIONAL-CONTEXT",
                }
            },
        ),
        (
            ("claude", "Stop"),
            Reply(block_reason="STOP-REASON-MARKER: please verify once more"),
            {"decision": "block", "reason": "STOP-REASON-MARKER: please verify once more"},
        ),
        (
            ("gemini", "AfterTool"),
            Reply(context="GEM-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "AfterTool",
                    "additionalContext": "GEM-MARKER",
                }
            },
        ),
        (
            ("gemini", "BeforeAgent"),
            Reply(context="BA-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "BeforeAgent",
                    "additionalContext": "BA-MARKER",
                }
            },
        ),
        (
            ("gemini", "SessionStart"),
            Reply(context="SS-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": "SS-MARKER",
                }
            },
        ),
        (
            ("gemini", "AfterAgent"),
            Reply(block_reason="AA-REASON-MARKER: please verify once more"),
            {"decision": "deny", "reason": "AA-REASON-MARKER: please verify once more"},
        ),
        (
            ("codex", "PostToolUse"),
            Reply(context="CDX-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "PostToolUse",
                    "additionalContext": "CDX-MARKER",
                }
            },
        ),
        (
            ("codex", "SessionStart"),
            Reply(context="CDX-SS-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": "CDX-SS-MARKER",
                }
            },
        ),
        (
            ("codex", "UserPromptSubmit"),
            Reply(context="CDX-UPS-MARKER"),
            {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": "CDX-UPS-MARKER",
                }
            },
        ),
        (
            ("codex", "Stop"),
            Reply(block_reason="CDX-STOP-REASON-MARKER: please verify once more"),
            {"decision": "block", "reason": "CDX-STOP-REASON-MARKER: please verify once more"},
        ),
    ],
    ids=lambda v: "/".join(v) if isinstance(v, tuple) else "",
)
def test_verified_envelopes(key: tuple[str, str], reply: Reply, accepted: object) -> None:
    assert _rendered(_event(SAMPLE[key]), reply) == accepted


@pytest.mark.parametrize("key", sorted(SAMPLE), ids="/".join)
def test_envelope_names_the_event_it_answers(key: tuple[str, str]) -> None:
    # The GSD failure: a PostToolUse envelope printed on Stop or PreCompact is rejected.
    rendered = _rendered(_event(SAMPLE[key]), Reply(context=C))
    if isinstance(rendered, dict) and "hookSpecificOutput" in rendered:
        assert rendered["hookSpecificOutput"]["hookEventName"] == key[1]


@pytest.mark.parametrize(
    "key",
    [k for k in sorted(SAMPLE) if "hookSpecificOutput" not in (EXPECTED_ALL[k] or {})],
    ids="/".join,
)
def test_no_context_where_the_agent_does_not_feed_it_to_the_model(key: tuple[str, str]) -> None:
    assert render_reply(_event(SAMPLE[key]), Reply(context=C)) == b""


@pytest.mark.parametrize("key", sorted(SAMPLE), ids="/".join)
def test_block_only_on_the_stop_event(key: tuple[str, str]) -> None:
    rendered = _rendered(_event(SAMPLE[key]), Reply(block_reason=B))
    if key in {("claude", "Stop"), ("codex", "Stop")}:
        assert rendered == BLOCK
    elif key == ("gemini", "AfterAgent"):
        assert rendered == DENY
    else:
        assert rendered is None


@pytest.mark.parametrize("agent", sorted(STOP_HOOK_ACTIVE))
def test_never_blocks_when_stop_hook_active(agent: str) -> None:
    event = _event(STOP_HOOK_ACTIVE[agent])
    assert event.stop_hook_active
    assert render_reply(event, Reply(block_reason=B)) == b""
    # The user may still be told; the agent is not held back a second time.
    assert _rendered(event, ALL) == SHOWN


@pytest.mark.parametrize("key", sorted(SAMPLE), ids="/".join)
def test_nothing_to_say_renders_nothing(key: tuple[str, str]) -> None:
    event = _event(SAMPLE[key])
    assert render_reply(event, Reply()) == b""
    assert render_reply(event, Reply(context="", user_message=" \n", block_reason="\t")) == b""


def test_codex_gets_only_schema_fields() -> None:
    # Codex validates hook output with additionalProperties: false; an unknown key fails it.
    allowed_top = {
        "continue",
        "decision",
        "reason",
        "stopReason",
        "suppressOutput",
        "systemMessage",
        "hookSpecificOutput",
    }
    for (agent, _), rel in SAMPLE.items():
        if agent != "codex":
            continue
        rendered = _rendered(_event(rel), ALL)
        if rendered is None:
            continue
        assert isinstance(rendered, dict)
        assert set(rendered) <= allowed_top
        specific = rendered.get("hookSpecificOutput", {})
        assert set(specific) <= {"hookEventName", "additionalContext"}


def test_output_is_one_json_document_and_keeps_text_intact() -> None:
    text = 'Kontext: 93 % belegt — "übergeben" <bald>\nzweite Zeile'
    event = _event(SAMPLE["claude", "PostToolUse"])
    out = render_reply(event, Reply(context=text))
    assert orjson.loads(out)["hookSpecificOutput"]["additionalContext"] == text
    assert not out.endswith(b"\n")  # byte-for-byte what the verified hooks printed
    assert out.count(b"\n") == 0  # the newline inside the text is escaped


def test_compaction_session_start_still_takes_context() -> None:
    # SessionStart(source=compact) counts as a compaction, but it is still a SessionStart:
    # the model gets the context (e.g. the post-compaction figure).
    event = _event("claude/2.1.332/compact/17-SessionStart.compact.json")
    assert event.kind == "compaction"
    assert _rendered(event, Reply(context=C)) == _ctx("SessionStart")
