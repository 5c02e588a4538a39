"""The status document at 10,000 sessions, in process: a row is built once for a session that
did not change, again when it changed or what it is judged with changed, and again (a few per
document) once it is old enough for its agent's settings files to have changed."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel
import orjson
import pytest

from ctxd.core import session as core
from ctxd.daemon import status
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings
from ctxd.daemon.lifecycle import Daemon
from ctxd.protocol import Request, resolve

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


def test_an_unchanged_document_goes_out_without_its_rows_encoded_again(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard asks twice a second: 10,000 rows encoded each time (8 MB) held the event
    loop for a tenth of a second, and every hook behind it."""
    clock = FakeClock()
    daemon = Daemon(world.env, clock)
    fill(daemon.centre)
    ask = Request("status", {}, b"")
    anyio.run(resolve, daemon._status(ask))
    encoded = 0
    dumps = orjson.dumps

    def counted(*args: Any, **kwargs: Any) -> bytes:
        nonlocal encoded
        out = dumps(*args, **kwargs)
        encoded += len(out)
        return out

    monkeypatch.setattr(orjson, "dumps", counted)
    clock.now += 2.0
    second = anyio.run(resolve, daemon._status(ask))
    assert encoded < len(second) / 20, f"{encoded:,} of {len(second):,} bytes encoded again"
    rows = orjson.loads(second)["sessions"]
    assert len(rows) == SESSIONS
    assert {r["age_s"] for r in rows} == {2.0}, "the ages must still move with the clock"


def test_the_document_is_what_encoding_it_whole_gives(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows kept as bytes, with what moves with the clock written after them, make the same
    JSON as the document encoded in one piece: same fields, same order, a broken session's
    row and a session's refused files and backlog included."""
    clock = FakeClock()
    centre = Centre.open(world.env, {"claude": world.claude_projects}, clock)
    for i in range(5):
        state = centre.sessions.open("claude", f"s{i}", None, cwd=str(world.work / f"p{i}"))
        centre.sessions.store(replace(state, tokens=100_000 + i, updated_at=clock.now - i))
    keys = [centre.sessions.key_for("claude", f"s{i}") for i in range(5)]
    figures = core.figures

    def broken_for_s3(state: core.SessionState, *args: Any) -> core.Figures:
        if state.session_id == "s3":
            raise ValueError("broken")
        return figures(state, *args)

    monkeypatch.setattr(core, "figures", broken_for_s3)
    centre.refused.note("/x/fifo", 1, "not a regular file", "transcript", keys[1])
    monkeypatch.setattr(
        centre.transcripts,
        "catching_up",
        lambda key: {"read": 5, "size": 9} if key == keys[2] else None,
    )
    daemon = {"pid": 1, "extra": {"n": 2}}
    data = centre.status.encoded(None, daemon)
    doc = orjson.loads(data)
    assert orjson.dumps(doc, option=orjson.OPT_NON_STR_KEYS) == data
    assert list(doc) == [
        "schema",  # first: a reader of the stream knows the version before any row
        "sessions",
        "learned_windows",
        "proved_contexts",
        "config_error",
        "refused_files",
        "hooks_answered",
        "counters",
        "daemon",
    ]
    assert doc["daemon"] == daemon
    rows = {r["session_id"]: r for r in doc["sessions"]}
    assert [r["session_id"] for r in doc["sessions"]] == ["s0", "s1", "s2", "s3", "s4"]
    assert list(rows["s0"])[-3:] == ["age_s", "catching_up", "refused_files"]
    assert list(rows["s0"])[:2] == ["session_id", "agent"]
    assert "error" in rows["s3"] and list(rows["s3"])[-3:] == list(rows["s0"])[-3:]
    assert rows["s4"]["age_s"] == 4.0
    assert rows["s2"]["catching_up"] == {"read": 5, "size": 9}
    assert rows["s0"]["catching_up"] is None
    assert [f["path"] for f in rows["s1"]["refused_files"]] == ["/x/fifo"]
    assert rows["s0"]["refused_files"] == []
    assert centre.status.document() == {k: v for k, v in doc.items() if k != "daemon"}


def test_rows_built_again_by_the_thousand_give_the_event_loop_back(world: World) -> None:
    """New settings judge all 10,000 sessions again, for a second and more: the status that
    does it lets hooks in meanwhile instead of holding them all that time."""
    clock = FakeClock()
    daemon = Daemon(world.env, clock)
    fill(daemon.centre)
    ask = Request("status", {}, b"")
    anyio.run(resolve, daemon._status(ask))
    daemon.centre.settings.apply(parse_settings('[thresholds]\nbasis = "window"\n'))
    gaps: list[float] = []

    async def ask_while_ticking() -> bytes:
        done = False

        async def tick() -> None:
            last = time.perf_counter()
            while not done:
                await anyio.lowlevel.checkpoint()
                gaps.append(time.perf_counter() - last)
                last = time.perf_counter()

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            await anyio.sleep(0.01)
            answer = await resolve(daemon._status(ask))
            done = True
        return answer

    built = daemon.centre.status.rows_built
    answer = anyio.run(ask_while_ticking)
    assert daemon.centre.status.rows_built == built + SESSIONS
    assert {r["basis"] for r in orjson.loads(answer)["sessions"]} == {"window"}
    assert max(gaps) < 0.1, f"the event loop was held {max(gaps):.2f} s"


def fill(centre: Centre) -> None:
    for i in range(SESSIONS):
        state = centre.sessions.open("claude", f"s{i}", None, cwd=f"/work/p{i}")
        centre.sessions.store(replace(state, tokens=100_000 + i, model="claude-sonnet-4-5"))
