"""The status document at 10,000 sessions, in process: a row is built once for a session that
did not change, again when it changed or what it is judged with changed, and again (a few per
document) once it is old enough for its agent's settings files to have changed."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from ctxd.core import session as core
from ctxd.daemon import status
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.in_process

SESSIONS = 10_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def many_sessions(world: World, clock: FakeClock) -> Centre:
    centre = Centre.open(world.env, {"claude": world.claude_projects}, clock)
    for i in range(SESSIONS):
        state = centre.sessions.open("claude", f"s{i}", None, cwd=str(world.work / f"p{i}"))
        centre.sessions.store(replace(state, tokens=100_000 + i, model="claude-sonnet-4-5"))
    return centre


def test_an_unchanged_sessions_row_is_built_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    centre = many_sessions(world, clock)
    judged = 0
    figures = core.figures

    def counted(*args: object, **kwargs: object) -> core.Figures:
        nonlocal judged
        judged += 1
        return figures(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(core, "figures", counted)
    first = centre.status.document()
    assert judged == SESSIONS
    clock.now += 1.0
    second = centre.status.document()
    assert judged == SESSIONS, "the second document judged unchanged sessions again"
    assert [r["session_id"] for r in second["sessions"]] == [
        r["session_id"] for r in first["sessions"]
    ]
    # What moves with the clock is not kept.
    ages = zip(second["sessions"], first["sessions"], strict=True)
    assert {r["age_s"] - f["age_s"] for r, f in ages} == {1.0}

    # A session that changed is built again, and shows its new figures.
    key = centre.sessions.key_for("claude", "s7")
    assert key is not None
    centre.sessions.store(replace(centre.sessions[key], tokens=150_000))
    rows = {r["session_id"]: r for r in centre.status.document()["sessions"]}
    assert judged == SESSIONS + 1
    assert rows["s7"]["tokens"] == 150_000

    # Old rows are built again a few at a time, never all at once, and each one's turn comes:
    # the dashboard's polls, half a second apart, rebuild every row within a bounded time.
    clock.now += status.ROW_REFRESH
    centre.status.document()
    assert judged == SESSIONS + 1 + status.REFRESH_PER_DOCUMENT
    before = judged
    polls = SESSIONS // status.REFRESH_PER_DOCUMENT
    for _ in range(polls):
        clock.now += 0.5
        centre.status.document()
    assert judged - before == polls * status.REFRESH_PER_DOCUMENT
    built = {kept.built_at for kept in centre.status._kept.values()}
    assert min(built) > clock.now - status.ROW_REFRESH - polls * 0.5, "a row never rebuilt"
    before = judged

    # New settings judge every row again.
    centre.settings.apply(parse_settings('[thresholds]\nbasis = "window"\n'))
    rows = {r["session_id"]: r for r in centre.status.document()["sessions"]}
    assert judged == before + SESSIONS
    assert rows["s7"]["basis"] == "window"


def test_a_window_learned_judges_its_models_sessions_again(world: World) -> None:
    clock = FakeClock()
    centre = many_sessions(world, clock)
    centre.status.document()
    built = centre.status.rows_built
    centre.status.document()
    assert centre.status.rows_built == built
    centre.sessions.learned["claude-sonnet-4-5"] = 123_456
    rows = centre.status.document()["sessions"]
    assert centre.status.rows_built == built + SESSIONS
    assert {r["window"] for r in rows} == {123_456}
