"""The pure session core: usage folding, authoritative statusline, hook answers."""

from __future__ import annotations

from dataclasses import replace

from ctxd.core.compaction import reserve_rule
from ctxd.core.events import HookEvent, PromptCache, Reply, StatuslineReport, UsageUpdate
from ctxd.core.measure import Severity
from ctxd.core.session import (
    Grounds,
    apply_statusline,
    apply_usage,
    figures,
    figures_row,
    learned_window,
    new_session,
    on_hook,
    proved_window,
    with_agent_config,
)
from ctxd.core.settings import HandoffSettings, Settings, Thresholds
from ctxd.core.window import Window

WINDOW_BASIS = Settings(thresholds=Thresholds(basis="window"))
#: The core is agent-agnostic: its tests use the generic rule (each agent's is tested with it).
RULE = reserve_rule


def _session(tokens: int | None = None, model: str = "claude-opus-4-6"):  # type: ignore[no-untyped-def]
    state = new_session("claude", "s1", "/t/s1.jsonl", now=0.0)
    if tokens is not None:
        state = apply_usage(state, UsageUpdate(tokens=tokens, model=model, turn_id="m0"), 1.0)
    return state


def _event(kind: str, name: str = "PostToolUse", **extra: object) -> HookEvent:
    return HookEvent(
        agent="claude",
        name=name,
        kind=kind,  # type: ignore[arg-type]
        session_id="s1",
        transcript_path="/t/s1.jsonl",
        cwd="/w",
        **extra,  # type: ignore[arg-type]
    )


def test_a_streamed_turn_counts_once_and_the_last_copy_wins() -> None:
    state = _session()
    for tokens in (1000, 1200, 1500):
        state = apply_usage(state, UsageUpdate(tokens=tokens, turn_id="msg_a"), 1.0)
    state = apply_usage(state, UsageUpdate(tokens=2000, turn_id="msg_b"), 2.0)
    assert (state.turns, state.tokens) == (2, 2000)


def test_a_compaction_in_the_transcript_resets_the_debounce_and_is_counted() -> None:
    state = _session(tokens=700_000)
    state, reply = on_hook(state, _event("tool_call"), Grounds(WINDOW_BASIS, RULE), 2.0)
    assert reply.context and reply.context.startswith("CONTEXT WARNING:")
    state = apply_usage(state, UsageUpdate(tokens=3_000, compaction=True), 3.0)
    assert state.compactions == 1
    assert state.policy.warned is Severity.OK
    state = apply_usage(state, UsageUpdate(tokens=700_000, turn_id="m9"), 4.0)
    _, reply = on_hook(state, _event("tool_call"), Grounds(WINDOW_BASIS, RULE), 5.0)
    assert reply.context and reply.context.startswith("CONTEXT WARNING:")  # warns again at once


def test_the_statusline_is_authoritative_until_newer_transcript_usage() -> None:
    state = _session(tokens=100_000, model="claude-sonnet-4-5")
    report = StatuslineReport(
        session_id="s1",
        transcript_path="/t/s1.jsonl",
        cwd="/w",
        model_id="claude-sonnet-4-5",
        model_name="Sonnet 4.5",
        window=200_000,
        used_pct=51.0,
        tokens=100_000,
    )
    state = apply_statusline(state, report, 2.0)
    fig = figures(state, Grounds(Settings(), RULE))
    assert (fig.window.size, fig.window.source) == (200_000, "statusline")
    assert fig.used_pct == 51.0  # Claude Code's own figure, not ours (50.0)
    assert learned_window(state) == ("claude-sonnet-4-5", 200_000)
    state = apply_usage(state, UsageUpdate(tokens=120_000, turn_id="m2"), 3.0)
    assert figures(state, Grounds(Settings(), RULE)).used_pct == 60.0


def test_a_learned_window_applies_to_another_session_of_the_same_model() -> None:
    other = _session(tokens=100_000, model="claude-sonnet-4-5")
    fig = figures(other, Grounds(Settings(), RULE, learned={"claude-sonnet-4-5": 200_000}))
    assert (fig.window.size, fig.window.source) == (200_000, "learned")


def test_a_window_in_the_model_id_beats_the_default() -> None:
    state = _session(tokens=100_000, model="claude-opus-4-6[1m]")
    fig = figures(state, Grounds(Settings(default_window=200_000), RULE))
    assert (fig.window.size, fig.window.source) == (1_000_000, "model-id")


def test_no_usage_yet_means_no_warning_and_no_figures() -> None:
    state = _session()
    state2, reply = on_hook(state, _event("tool_call"), Grounds(WINDOW_BASIS, RULE), 2.0)
    assert reply.context is None and state2.policy == state.policy
    assert figures(state, Grounds(Settings(), RULE)).used_pct is None


def test_a_prompt_speaks_only_when_the_level_rose_since_the_last_warning() -> None:
    state = _session(tokens=700_000)
    state, reply = on_hook(
        state, _event("prompt", "UserPromptSubmit"), Grounds(WINDOW_BASIS, RULE), 2.0
    )
    assert reply.context and reply.context.startswith("CONTEXT WARNING:")
    state, reply = on_hook(
        state, _event("prompt", "UserPromptSubmit"), Grounds(WINDOW_BASIS, RULE), 3.0
    )
    assert reply.context is None


def test_stop_asks_for_a_handoff_once_as_a_message_or_a_block() -> None:
    state = _session(tokens=750_000)
    asked, reply = on_hook(state, _event("stop", "Stop"), Grounds(WINDOW_BASIS, RULE), 2.0)
    assert reply.user_message and reply.block_reason is None
    _, again = on_hook(asked, _event("stop", "Stop"), Grounds(WINDOW_BASIS, RULE), 3.0)
    assert again.user_message is None and again.block_reason is None
    blocking = replace(WINDOW_BASIS, handoff=HandoffSettings(action="block"))
    _, reply = on_hook(state, _event("stop", "Stop"), Grounds(blocking, RULE), 2.0)
    assert reply.block_reason and reply.user_message is None
    _, reply = on_hook(
        state, _event("stop", "Stop", stop_hook_active=True), Grounds(blocking, RULE), 2.0
    )
    assert reply.block_reason is None


def test_a_subagents_stop_asks_for_no_handoff() -> None:
    state = replace(_session(tokens=750_000), parent="/t/parent.jsonl")
    blocking = replace(WINDOW_BASIS, handoff=HandoffSettings(action="block"))
    for grounds in (Grounds(WINDOW_BASIS, RULE), Grounds(blocking, RULE)):
        after, reply = on_hook(state, _event("stop", "Stop"), grounds, 2.0)
        assert reply.user_message is None and reply.block_reason is None
        assert not after.policy.handoff_asked


def test_an_agent_that_reads_no_stop_answer_is_asked_with_its_next_tool_call() -> None:
    """`handoff_on_tool_call`: a stop past the handoff point says and records nothing (the
    agent would not read it); the next tool call's context carries the request after the
    warning, once, and only then is it asked."""
    grounds = Grounds(WINDOW_BASIS, RULE, handoff_on_tool_call=True)
    state = _session(tokens=750_000)
    stopped, reply = on_hook(state, _event("stop", "Stop"), grounds, 2.0)
    assert reply == Reply() and not stopped.policy.handoff_asked
    asked, reply = on_hook(stopped, _event("tool_call"), grounds, 3.0)
    assert reply.context is not None
    warning, handoff = reply.context.split("\n")
    assert warning.startswith("CONTEXT CRITICAL:") and handoff.startswith("CONTEXT HANDOFF:")
    assert reply.user_message is None and reply.block_reason is None
    assert asked.policy.handoff_asked and not asked.policy.handoff_unconfirmed
    _, again = on_hook(asked, _event("tool_call"), grounds, 4.0)
    assert "CONTEXT HANDOFF:" not in (again.context or "")
    # a subagent's tool call leaves the request to its parent's
    child = replace(state, parent="/t/parent.jsonl")
    after, reply = on_hook(child, _event("tool_call"), grounds, 3.0)
    assert "CONTEXT HANDOFF:" not in (reply.context or "") and not after.policy.handoff_asked


def test_compaction_events_reset_and_session_end_marks_the_session() -> None:
    state = _session(tokens=700_000)
    state, _ = on_hook(state, _event("tool_call"), Grounds(WINDOW_BASIS, RULE), 2.0)
    assert state.policy.warned is Severity.WARNING
    state, _ = on_hook(
        state, _event("compaction", "PreCompact", source="auto"), Grounds(WINDOW_BASIS, RULE), 3.0
    )
    assert state.policy.warned is Severity.OK
    state, _ = on_hook(
        state, _event("session_end", "SessionEnd", source="other"), Grounds(WINDOW_BASIS, RULE), 4.0
    )
    assert state.ended_at == 4.0


# ----------------------------------------------------------------- fidelity of the figures


def _point_rule(window: int, model: str | None, rules: object, config: object) -> int | None:
    """A rule shaped like Claude Code's: window - 33,000, off when the config says so, 50 %
    of that with PCT=50 (the rule itself is tested in tests/agents/claude)."""
    cfg = dict(config)  # type: ignore[call-overload]
    if cfg.get("OFF") == "1":
        return None
    point = window - 33_000
    return point // 2 if cfg.get("PCT") == "50" else point


def test_pending_output_counts_towards_the_point_but_not_the_window() -> None:
    state = new_session("claude", "s1", "/t/s1.jsonl", now=0.0)
    state = apply_usage(state, UsageUpdate(tokens=166_900, pending=100, turn_id="m"), 1.0)
    fig = figures(state, Grounds(Settings(default_window=200_000), _point_rule))
    assert (fig.window.size, fig.compaction_at) == (200_000, 167_000)
    assert fig.tokens_to_compaction == 0
    assert fig.used_pct == 166_900 / 2_000
    assert fig.basis_used_pct == 100.0


def test_usage_beyond_the_window_is_not_clamped_and_is_flagged() -> None:
    state = _session(213_000)
    fig = figures(state, Grounds(WINDOW_BASIS, RULE), window_override=Window(200_000, "option"))
    assert fig.used_pct == 106.5 and fig.over_window
    row = figures_row(fig)
    assert row["used_pct"] == 106.5 and row["window_too_small"] is True


def test_estimated_figures_stay_marked_until_a_real_one() -> None:
    state = _session(100_000)
    state = apply_usage(
        state, UsageUpdate(tokens=20_000, compaction=True, estimated=True, turn_id="b"), 2.0
    )
    assert figures_row(figures(state, Grounds(Settings(), RULE)))["estimated"] is True
    assert state.compactions == 1
    state = apply_usage(state, UsageUpdate(tokens=30_000, estimated=True, turn_id="b"), 3.0)
    assert (state.compactions, state.turns) == (1, 1)
    state = apply_usage(state, UsageUpdate(tokens=35_000, turn_id="m2"), 4.0)
    assert figures_row(figures(state, Grounds(Settings(), RULE)))["estimated"] is False


def test_a_rule_without_auto_compaction_falls_back_to_the_window() -> None:
    state = with_agent_config(_session(150_000), {"OFF": "1"})
    fig = figures(state, Grounds(Settings(default_window=200_000), _point_rule))
    assert not fig.auto_compaction and fig.compaction_at == 200_000
    row = figures_row(fig)
    assert (row["compaction_at"], row["tokens_to_compaction"]) == (None, None)


def test_the_hook_config_is_laid_over_the_settings_files() -> None:
    state = _session(100_000)
    settings = Settings()
    assert figures(state, Grounds(settings, _point_rule)).compaction_at == 967_000
    assert (
        figures(state, Grounds(settings, _point_rule, config={"PCT": "50"})).compaction_at
        == 483_500
    )
    hooked = with_agent_config(state, {"PCT": "50"})
    assert hooked.agent_config == (("PCT", "50"),)
    assert with_agent_config(hooked, {"PCT": "50"}) is hooked
    assert figures(hooked, Grounds(settings, _point_rule)).compaction_at == 483_500
    assert (
        figures(hooked, Grounds(settings, _point_rule, config={"OFF": "1"})).auto_compaction
        is False
    )


def test_an_automatic_compaction_teaches_the_window() -> None:
    # A model the table puts at 1M, which compacted at 170,251: its window is 200k.
    state = _session(150_000, model="some-model")
    state = apply_usage(
        state,
        UsageUpdate(tokens=30_000, compaction=True, compacted_from=170_251, turn_id="b"),
        2.0,
    )
    settings = Settings(windows={"some-model": 1_000_000})
    fig = figures(state, Grounds(settings, _point_rule))
    assert fig.window == Window(200_000, "compaction")
    # An authoritative source still outranks it.
    assert figures(
        state, Grounds(settings, _point_rule, learned={"some-model": 1_000_000})
    ).window.source == ("learned")
    # Under the agent's 50 % override the points halve: 170,251 is below 400k's (183,500) and
    # 1M's (483,500), past 272k's (119,500): the closest point below it names the window.
    halved = with_agent_config(state, {"PCT": "50"})
    assert figures(halved, Grounds(settings, _point_rule)).window == Window(272_000, "compaction")


def _resumed_after_expiry(tokens: int, cache: PromptCache, config: object, now: float) -> bool:
    """A resume rule: the agent compacts a session resumed once its cache expired."""
    return cache.expires_at is not None and now >= cache.expires_at


def test_a_resume_after_the_cache_expired_counts_as_a_compaction_to_come() -> None:
    cache = PromptCache(ttl=3600, expires_at=100.0, warm=True)
    state = replace(_session(tokens=700_000), prompt_cache=cache)
    grounds = Grounds(WINDOW_BASIS, RULE, resume_rule=_resumed_after_expiry)
    state, reply = on_hook(state, _event("tool_call"), grounds, 2.0)
    assert reply.context and reply.context.startswith("CONTEXT WARNING:")
    resume = _event("session_start", "SessionStart", source="resume")
    # Before the cache expired: nothing to expect.
    early, _ = on_hook(state, resume, grounds, 50.0)
    assert early.expected_compactions == 0 and early.policy.warned is Severity.WARNING
    # After: the warnings given on the old context are reset, one compaction is expected.
    late, _ = on_hook(state, resume, grounds, 150.0)
    assert late.expected_compactions == 1 and late.policy.warned is Severity.OK
    # A new session, or an agent without such a rule: nothing either.
    started, _ = on_hook(
        state, _event("session_start", "SessionStart", source="startup"), grounds, 150.0
    )
    assert started.expected_compactions == 0
    plain, _ = on_hook(state, resume, Grounds(WINDOW_BASIS, RULE), 150.0)
    assert plain.expected_compactions == 0


# ------------------------------------------------------- what a session proved of its window

SOL = Settings(windows={"gpt-5.6-sol": 272_000})


def _held(state, tokens: int, turn: str, model: str = "gpt-5.6-sol", **kw):  # type: ignore[no-untyped-def]
    return apply_usage(state, UsageUpdate(tokens=tokens, model=model, turn_id=turn, **kw), 1.0)


def test_a_window_the_session_proved_outlives_its_compaction() -> None:
    # The real gpt-5.6-sol session: 371,566 held (a 272,000 row says otherwise), then pi
    # compacted and the next answers are small again.
    state = new_session("pi", "s1", "/t/s1.jsonl", now=0.0)
    state = _held(state, 300_000, "a1")
    state = _held(state, 371_566, "a2", pending=40)
    assert figures(state, Grounds(SOL, RULE)).window == Window(400_000, "usage")
    state = apply_usage(state, UsageUpdate(tokens=9_000, compaction=True, estimated=True), 2.0)
    state = _held(state, 45_000, "a3")
    fig = figures(state, Grounds(SOL, RULE))
    assert fig.window == Window(400_000, "usage")  # not the table's 272,000 again
    assert state.proved_tokens == 371_606  # the prompt and its output both fit
    assert proved_window(state) == ("gpt-5.6-sol", 371_606)


def test_an_estimate_proves_nothing_and_another_model_starts_afresh() -> None:
    state = new_session("pi", "s1", "/t/s1.jsonl", now=0.0)
    state = _held(state, 380_000, "a1", estimated=True)
    assert state.proved_tokens is None
    state = _held(state, 371_566, "a2")
    state = _held(state, 20_000, "a3", model="gpt-5.6-terra")
    assert state.proved_tokens == 20_000
    assert figures(state, Grounds(Settings(windows={"gpt-5.6-terra": 272_000}), RULE)).window == (
        Window(272_000, "table")
    )


def test_a_catalog_window_is_the_last_update_s_and_no_window_learned() -> None:
    # pi's reader stamps its catalog's window for the answer's provider and model on every
    # update; a model it has no entry for is stamped None, and the table is back.
    table = Grounds(Settings(windows={"claude-sonnet-4-6": 200_000}), RULE)
    state = new_session("pi", "s1", "/t/s1.jsonl", now=0.0)
    state = _held(state, 30_000, "a1", model="claude-sonnet-4-6", catalog_window=1_000_000)
    assert figures(state, table).window == Window(1_000_000, "agent")
    assert learned_window(state) is None  # one provider's figure, not the model name's
    state = apply_usage(
        state, UsageUpdate(tokens=9_000, compaction=True, catalog_window=1_000_000), 2.0
    )
    assert figures(state, table).window == Window(1_000_000, "agent")
    state = _held(state, 20_000, "a2", model="claude-sonnet-4-6")
    assert figures(state, table).window == Window(200_000, "table")


def test_a_model_switch_hook_forgets_what_the_old_model_proved_and_its_catalog_window() -> None:
    state = _held(new_session("pi", "s1", "/t/s1.jsonl", now=0.0), 371_566, "a1")
    state = replace(state, catalog_window=272_000)
    state, _ = on_hook(
        state,
        _event("model_switched", name="PostModelSwitch", to_model="gpt-5.6-terra"),
        Grounds(SOL, RULE),
        2.0,
    )
    assert state.proved_tokens is None
    assert state.catalog_window is None


def test_what_another_session_proved_of_the_model_applies() -> None:
    state = _held(new_session("pi", "s2", "/t/s2.jsonl", now=0.0), 30_000, "b1")
    grounds = Grounds(SOL, RULE, proved={"gpt-5.6-sol": 371_606})
    assert figures(state, grounds).window == Window(400_000, "usage")
    assert figures(state, Grounds(SOL, RULE)).window == Window(272_000, "table")


def test_what_another_session_held_does_not_raise_a_providers_catalog_window() -> None:
    # One id, two providers: an OpenAI API session held 300,000 of gpt-5; through GitHub
    # Copilot pi runs gpt-5 with 128,000 and compacts at 111,617. Only this session's own
    # figures may raise that window.
    grounds = Grounds(Settings(), RULE, proved={"gpt-5": 300_000})
    state = _held(
        new_session("pi", "s2", "/t/s2.jsonl", now=0.0),
        30_000,
        "b1",
        model="gpt-5",
        catalog_window=128_000,
    )
    assert figures(state, grounds).window == Window(128_000, "agent")
    state = _held(state, 150_000, "b2", model="gpt-5", catalog_window=128_000)
    assert figures(state, grounds).window.size > 150_000  # this session proved more


def test_an_agents_own_rows_judge_its_sessions() -> None:
    # One model id, two agents: Codex's table holds the 95 % it reports, pi runs the model
    # with the whole window.
    settings = Settings(
        windows={"gpt-5.6-sol": 258_400},
        agent_windows={"pi": {"gpt-5.6-sol": 272_000}},
    )
    pi = _held(new_session("pi", "s1", "/t/s1.jsonl", now=0.0), 30_000, "a1")
    codex = replace(pi, agent="codex")
    assert figures(pi, Grounds(settings, RULE)).window == Window(272_000, "table")
    assert figures(codex, Grounds(settings, RULE)).window == Window(258_400, "table")
