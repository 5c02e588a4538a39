"""Which window applies: each source beats the next, unusable sources are skipped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ctxd.core.window import (
    Window,
    infer_window,
    lookup_table,
    model_key,
    resolve_window,
    window_for_usage,
    window_from_model_id,
)
from ctxd.errors import InvalidInput

TABLE = {
    "claude-sonnet-4-5": 200_000,
    "claude": 200_000,
    "gemini-3": 1_048_576,
    "gpt-5.5": 258_400,
}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-opus-4-6[1m]", 1_000_000),
        ("claude-opus-4-6[1M]", 1_000_000),
        ("claude-sonnet-4-5[200k]", 200_000),
        ("model[1.5m]", 1_500_000),
        ("claude-opus-4-6", None),
        ("claude-opus-4-6[beta]", None),
        ("model[0k]", None),
        ("[1m]-not-at-the-end", None),
        ("", None),
        (None, None),
    ],
)
def test_window_from_model_id(model: str | None, expected: int | None) -> None:
    assert window_from_model_id(model) == expected


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-opus-4-6[1m]", "claude-opus-4-6"),
        ("claude-opus-4-6", "claude-opus-4-6"),
        (" Claude-Opus-4-6[1M] ", "claude-opus-4-6"),
        ("gpt-5.5", "gpt-5.5"),
    ],
)
def test_model_key_strips_the_size_suffix(model: str, key: str) -> None:
    assert model_key(model) == key


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-5", 200_000),  # exact
        ("claude-sonnet-4-5-20250929", 200_000),  # prefix
        ("claude-opus-4-6", 200_000),  # shorter prefix "claude"
        ("gemini-3.8-flash", 1_048_576),
        ("GPT-5.5", 258_400),  # case-insensitive
        ("llama-4", None),
        (None, None),
    ],
)
def test_lookup_table(model: str | None, expected: int | None) -> None:
    assert lookup_table(model, TABLE) == expected


def test_lookup_table_prefers_exact_and_then_longest_prefix() -> None:
    table = {"claude": 1, "claude-sonnet": 2, "claude-sonnet-4-5": 3, "claude-sonnet-4-5-x": 4}
    assert lookup_table("claude-sonnet-4-5-x", table) == 4
    assert lookup_table("claude-sonnet-4-5-20250929", table) == 3
    assert lookup_table("claude-sonnet-3", table) == 2
    assert lookup_table("claude-haiku", table) == 1


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (1, 200_000),
        (200_000, 200_000),
        (200_001, 272_000),
        (300_000, 400_000),
        (999_999, 1_000_000),
        (1_040_000, 1_048_576),
        (1_500_000, 2_000_000),
        (2_500_000, 2_500_000),
    ],
)
def test_window_for_usage(tokens: int, expected: int) -> None:
    assert window_for_usage(tokens) == expected


def resolve(
    *,
    statusline: int | None = None,
    agent_reported: int | None = None,
    model: str | None = None,
    learned: Mapping[str, int] | None = None,
    table: Mapping[str, int] | None = None,
    tokens: int = 0,
    default: int = 1_000_000,
    configured: int | None = None,
    catalog: int | None = None,
) -> Window:
    return resolve_window(
        configured=configured,
        catalog=catalog,
        statusline=statusline,
        agent_reported=agent_reported,
        model=model,
        learned=learned or {},
        table=TABLE if table is None else table,
        tokens=tokens,
        default=default,
    )


# Each row: every source from the named one downwards is present with a distinct size, so
# the row proves that source beats all the ones below it.
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {
                "statusline": 400_000,
                "agent_reported": 258_400,
                "model": "claude-sonnet-4-5[1m]",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 300_000,
            },
            Window(400_000, "statusline"),
        ),
        (
            {
                "agent_reported": 258_400,
                "model": "claude-sonnet-4-5[1m]",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 300_000,
            },
            Window(258_400, "agent"),
        ),
        (
            {
                "configured": 128_000,
                "model": "claude-sonnet-4-5[1m]",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 300_000,
            },
            Window(128_000, "config"),
        ),
        (
            {"agent_reported": 258_400, "configured": 128_000, "tokens": 0},
            Window(258_400, "agent"),
        ),
        (
            {"configured": 128_000, "catalog": 144_000, "tokens": 0},
            Window(128_000, "config"),
        ),
        (
            {
                "catalog": 144_000,
                "model": "claude-sonnet-4-5[1m]",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 100_000,
            },
            Window(144_000, "agent"),
        ),
        (
            {
                "model": "claude-sonnet-4-5[1m]",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 300_000,
            },
            Window(1_000_000, "model-id"),
        ),
        (
            {
                "model": "claude-sonnet-4-5",
                "learned": {"claude-sonnet-4-5": 2_000_000},
                "tokens": 300_000,
            },
            Window(2_000_000, "learned"),
        ),
        ({"model": "claude-sonnet-4-5-20250929", "tokens": 150_000}, Window(200_000, "table")),
        ({"model": "claude-sonnet-4-5-20250929", "tokens": 300_000}, Window(400_000, "usage")),
        ({"model": "unknown-model", "tokens": 1_200_000}, Window(2_000_000, "usage")),
        ({"model": "unknown-model", "tokens": 500_000}, Window(1_000_000, "default")),
        ({"tokens": 0}, Window(1_000_000, "default")),
        ({"tokens": 0, "default": 200_000}, Window(200_000, "default")),
    ],
)
def test_precedence(kwargs: dict[str, object], expected: Window) -> None:
    assert resolve(**kwargs) == expected  # type: ignore[arg-type]


def test_a_1m_model_is_not_assumed_200k() -> None:
    # graceful-handoff's failure: a 200K fallback fired 5-7x too early on 1M models.
    assert resolve(model="claude-opus-4-6[1m]", tokens=150_000).size == 1_000_000


def test_learned_window_is_found_from_the_bare_transcript_model() -> None:
    learned = {model_key("claude-opus-4-6[1m]"): 1_000_000}
    assert resolve(model="claude-opus-4-6", learned=learned) == Window(1_000_000, "learned")


def test_usage_equal_to_the_window_does_not_raise_it() -> None:
    assert resolve(model="claude-sonnet-4-5", tokens=200_000) == Window(200_000, "table")


def test_authoritative_sources_are_kept_even_when_usage_exceeds_them() -> None:
    assert resolve(statusline=200_000, tokens=250_000) == Window(200_000, "statusline")
    assert resolve(agent_reported=258_400, tokens=260_000) == Window(258_400, "agent")


@pytest.mark.parametrize("bad", [0, -1])
def test_nonpositive_sources_are_skipped(bad: int) -> None:
    got = resolve(
        statusline=bad,
        agent_reported=bad,
        catalog=bad,
        model="claude-sonnet-4-5[0k]",
        learned={"claude-sonnet-4-5": bad},
        table={"claude-sonnet-4-5": bad, "claude": 200_000},
    )
    assert got == Window(200_000, "table")


def test_nonpositive_table_entries_fall_through_to_the_default() -> None:
    assert resolve(model="x", table={"x": 0}) == Window(1_000_000, "default")


@pytest.mark.parametrize("bad", [0, -5])
def test_nonpositive_default_is_invalid(bad: int) -> None:
    with pytest.raises(InvalidInput, match="positive"):
        resolve(default=bad)


# ------------------------------------------------------- a window from an observed compaction


def _claude_like(window: int) -> int:
    return window - 33_000


@pytest.mark.parametrize(
    ("compacted_at", "window"),
    [
        (167_000, 200_000),
        (170_251, 200_000),  # marot/spotter's 2.1.39 session: preTokens 170,251
        (967_100, 1_000_000),
        (239_000, 272_000),
        (150_000, None),  # below every point: no window would have compacted there
        (5_000_000, None),  # beyond every common window
    ],
)
def test_infer_window(compacted_at: int, window: int | None) -> None:
    assert infer_window(compacted_at, _claude_like) == window


def test_infer_window_takes_the_closest_point_below() -> None:
    # With a 50 % override every point halves: 490,100 is just past 1M's (483,500), far past
    # 400k's (183,500).
    assert infer_window(490_100, lambda w: (w - 33_000) // 2) == 1_000_000
    # A rule that never compacts teaches nothing.
    assert infer_window(170_000, lambda w: None) is None


def _cline_like(window: int) -> int:
    return window * 9 // 10  # Cline CLI's, for a model whose usable input is its window


@pytest.mark.parametrize(
    ("compacted_at", "lead", "window"),
    [
        (178_902, 0.0, None),  # below every point: no window explains it without a lead
        (178_902, 0.1, 200_000),  # point 180,000: within a tenth of it
        (150_000, 0.1, None),  # further below 200,000's point than a tenth
        (250_000, 0.1, 272_000),  # past 272,000's point (244,800), as without a lead
    ],
)
def test_infer_window_with_an_agent_that_compacts_on_the_next_requests_estimate(
    compacted_at: int, lead: float, window: int | None
) -> None:
    assert infer_window(compacted_at, _cline_like, lead) == window


def test_infer_window_allows_a_record_a_few_tokens_short_of_the_point() -> None:
    # Claude Code 2.1.337 compared 366,998 + 2 estimated tokens with its point 367,000 and
    # recorded preTokens 366,999.
    assert infer_window(366_999, lambda w: min(w, 400_000) - 33_000) is None  # see below
    assert infer_window(366_999, lambda w: w - 33_000) == 400_000
    assert infer_window(366_800, lambda w: w - 33_000) is None  # 200 short: not that point


def test_a_compaction_every_window_explains_says_nothing_of_the_window() -> None:
    # A compact window of 400,000 caps every window from 400k up at the same point: the
    # compaction at 367,100 fits 400k, 1M and 2M alike, so the window is left to other sources.
    assert infer_window(367_100, lambda w: min(w, 400_000) - 33_000) is None
    # Below the cap the windows still differ: 200k explains 170,251 best.
    assert infer_window(170_251, lambda w: min(w, 400_000) - 33_000) == 200_000


def test_resolve_window_ranks_an_inferred_window_below_learned_above_table() -> None:
    kwargs: dict[str, Any] = {"statusline": None, "agent_reported": None, "model": "m", "tokens": 0}
    table = {"m": 1_000_000}
    assert resolve_window(learned={}, table=table, inferred=lambda: 200_000, **kwargs) == (
        Window(200_000, "compaction")
    )
    learned = resolve_window(
        learned={"m": 400_000}, table=table, inferred=lambda: 200_000, **kwargs
    )
    assert learned == Window(400_000, "learned")
    assert resolve_window(learned={}, table=table, inferred=lambda: None, **kwargs) == Window(
        1_000_000, "table"
    )


# ------------------------------------------------------- a window a session's usage proved


@pytest.mark.parametrize(
    ("tokens", "proved", "expected"),
    [
        # a session held 371,566 of a 272,000 table row, then compacted: what it held still
        # says the window is larger than the table's (no other sizes stated: a common window)
        (371_566, 0, Window(400_000, "usage")),
        (20_000, 371_566, Window(400_000, "usage")),
        (20_000, 0, Window(272_000, "table")),
        (20_000, 272_000, Window(272_000, "table")),  # held exactly the row: nothing to raise
        (20_000, 272_001, Window(400_000, "usage")),
        (500_000, 371_566, Window(1_000_000, "usage")),  # the larger of the two decides
    ],
)
def test_what_a_model_proved_to_hold_raises_an_assumed_window(
    tokens: int, proved: int, expected: Window
) -> None:
    table = {"gpt-5.6-sol": 272_000}
    got = resolve_window(
        statusline=None,
        agent_reported=None,
        model="gpt-5.6-sol",
        learned={},
        table=table,
        tokens=tokens,
        proved=proved,
    )
    assert got == expected


#: The gpt-5.6 family as its owner states it: 272,000 (pi's and Codex 0.171's catalogs),
#: 372,000 (Codex 0.144's), up to 872,000 (Codex 0.171's max_context_window).
GPT_5_6_SIZES = (272_000, 372_000, 872_000)


def _gpt_5_6(table: int, tokens: int, proved: int, catalog: int | None = None) -> Window:
    """The window of a gpt-5.6-sol session whose table row says `table`."""
    return resolve_window(
        statusline=None,
        agent_reported=None,
        model="gpt-5.6-sol",
        learned={},
        table={"gpt-5.6-sol": table},
        tokens=tokens,
        proved=proved,
        sizes=GPT_5_6_SIZES,
        catalog=catalog,
    )


@pytest.mark.parametrize(
    ("tokens", "proved", "expected"),
    [
        # the real gpt-5.6-sol session under pi: held 371,566, overflowed at 371,606 and
        # compacted; the window it proved is the owner's 372,000, not another model's 400,000
        (371_566, 0, Window(372_000, "usage")),
        (40_000, 371_566, Window(372_000, "usage")),  # after its compaction, still proved
        (40_000, 312_658, Window(372_000, "usage")),
        (40_000, 0, Window(272_000, "table")),
        (40_000, 372_000, Window(372_000, "usage")),
        (40_000, 372_001, Window(872_000, "usage")),  # the next size the owner states
        (900_000, 0, Window(1_000_000, "usage")),  # beyond them all: the common windows
    ],
)
def test_a_window_a_session_proved_is_one_its_model_comes_in(
    tokens: int, proved: int, expected: Window
) -> None:
    assert _gpt_5_6(272_000, tokens, proved) == expected


@pytest.mark.parametrize(
    ("tokens", "sizes", "expected"),
    [
        (371_566, (272_000, 372_000, 872_000), 372_000),
        (371_566, (372_000, 272_000), 372_000),  # in any order
        (371_566, (), 400_000),  # no sizes stated: the common windows
        (371_566, (0, -1), 400_000),  # unusable sizes are skipped
        (2_500_000, (872_000,), 2_500_000),
    ],
)
def test_window_for_usage_prefers_the_model_s_own_sizes(
    tokens: int, sizes: tuple[int, ...], expected: int
) -> None:
    assert window_for_usage(tokens, sizes) == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"agent_reported": 258_400}, Window(258_400, "agent")),
        ({"statusline": 200_000}, Window(200_000, "statusline")),
        ({"configured": 128_000}, Window(128_000, "config")),
        ({"learned": {"gpt-5.6-sol": 300_000}}, Window(300_000, "learned")),
    ],
)
def test_what_a_model_proved_never_overrides_a_report(
    kwargs: dict[str, Any], expected: Window
) -> None:
    # The reports are about this very model; a figure above them is flagged (over_window),
    # not taken as a window.
    base: dict[str, Any] = {
        "statusline": None,
        "agent_reported": None,
        "learned": {},
        "model": "gpt-5.6-sol",
        "table": {"gpt-5.6-sol": 272_000},
        "tokens": 10_000,
    }
    assert resolve_window(**{**base, **kwargs}, proved=371_566) == expected


# ------------------------------------------------------- the agent's own model catalog


@pytest.mark.parametrize(
    ("catalog", "tokens", "proved", "expected"),
    [
        # pi's catalog: anthropic claude-sonnet-4-6 runs with 1,000,000 where a table says 200,000
        (1_000_000, 32_917, 0, Window(1_000_000, "agent")),
        # gpt-5.6-sol: 272,000 in pi's catalog; a session that held 371,566 proved the owner's
        # 372,000, through its compaction too
        (272_000, 100_000, 0, Window(272_000, "agent")),
        (272_000, 272_000, 0, Window(272_000, "agent")),  # held exactly: nothing to raise
        (272_000, 371_566, 0, Window(372_000, "usage")),
        (272_000, 40_000, 371_606, Window(372_000, "usage")),
        (None, 100_000, 0, Window(200_000, "table")),  # in no catalog: the table, as before
    ],
)
def test_a_catalog_window_is_the_agent_s_and_usage_raises_it(
    catalog: int | None, tokens: int, proved: int, expected: Window
) -> None:
    got = _gpt_5_6(200_000, tokens, proved, catalog)
    assert got == expected


def test_a_catalog_window_outranks_one_learned_for_the_model_s_name() -> None:
    # Learned from another provider's session of the same id (github-copilot gpt-5: 128,000),
    # or another agent's (Codex's 95 %): the catalog's entry is this provider's own.
    got = resolve(model="gpt-5", learned={"gpt-5": 128_000}, catalog=400_000, tokens=150_000)
    assert got == Window(400_000, "agent")


def test_a_report_outranks_the_catalog_and_is_not_raised() -> None:
    # pi's entry in the session (its live figure) wins, and is kept even under more usage.
    got = resolve(agent_reported=272_000, catalog=1_000_000, tokens=300_000)
    assert got == Window(272_000, "agent")
