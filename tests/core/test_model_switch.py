"""Model switches and resumes in the core: the size the agent states is taken at once."""

from __future__ import annotations

from dataclasses import replace

from ctxd import agents
from ctxd.core.events import HookEvent
from ctxd.core.session import Grounds, new_session, on_hook
from ctxd.core.settings import Settings

CLAUDE = agents.spec("claude")
GROUNDS = Grounds(Settings(), CLAUDE.compaction)


def event(name: str, kind: str, **fields: object) -> HookEvent:
    return HookEvent("claude", name, kind, "s1", None, None, **fields)  # type: ignore[arg-type]


def test_a_resumed_session_start_states_its_tokens() -> None:
    state = new_session("claude", "s1", None, 0.0)
    state, _ = on_hook(
        state,
        event("SessionStart", "session_start", source="resume", context_tokens=420_000),
        GROUNDS,
        1.0,
    )
    assert state.tokens == 420_000


def test_post_model_switch_takes_the_model_and_drops_the_old_window() -> None:
    state = replace(
        new_session("claude", "s1", None, 0.0),
        model="claude-opus-4-8[1m]",
        tokens=120_000,
        statusline_window=1_000_000,
    )
    switched = event(
        "PostModelSwitch",
        "model_switched",
        to_model="claude-sonnet-4-6",
        context_tokens=121_000,
        source="auto",
    )
    state, reply = on_hook(state, switched, GROUNDS, 1.0)
    assert (state.model, state.tokens, state.statusline_window) == (
        "claude-sonnet-4-6",
        121_000,
        None,
    )
    assert not reply.context and not reply.user_message


def test_pre_model_switch_to_a_bigger_window_is_quiet() -> None:
    state = replace(
        new_session("claude", "s1", None, 0.0), model="claude-sonnet-4-6", tokens=150_000
    )
    pre = event(
        "PreModelSwitch", "model_switch", to_model="claude-opus-4-8[1m]", context_tokens=150_000
    )
    _, reply = on_hook(state, pre, GROUNDS, 1.0)
    assert reply.user_message is None and reply.deny_reason is None
