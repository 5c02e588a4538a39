"""The dashboard's history: as JSON from each series' kept bytes, the history encoded whole; kept
across restarts in a bounded file, read back safely whatever was made of it."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import orjson
import pytest
from loopback import free_port

from ctxd.daemon.history import HISTORY_FILE, HISTORY_FILE_MAX, History, load_history

if TYPE_CHECKING:
    from conftest import World


def test_the_historys_json_follows_points_added_dropped_and_sessions_gone() -> None:
    history = History(points=3)
    assert history.encoded() == orjson.dumps(history.export()) == b"{}"
    history.record([("a", 1.0, 5, 0), ("b", 1.0, 6, 0), ("c", 1.0, None, 0)])
    assert history.encoded() == orjson.dumps(history.export())
    for at in range(2, 8):  # "a" moves every time: past 3 points the oldest go
        history.record([("a", float(at), 5 + at, 0), ("b", float(at), 6, 0)])
        assert history.encoded() == orjson.dumps(history.export())
    history.record([("b", 9.0, 6, 1)])  # "a" is gone; "b" compacted
    assert history.encoded() == orjson.dumps(history.export())
    assert orjson.loads(history.encoded()) == {"b": [[1.0, 6, 0], [9.0, 6, 1]]}


def test_the_history_file_gives_back_what_was_saved_newest_series_first_within_its_bound() -> None:
    history = History(points=4)
    for at in range(1, 7):
        history.record([("old", float(at), 1000 * at, 0), ("new", at + 100.0, 10 * at, at // 3)])
    data, left_out = history.saved()
    assert left_out == 0
    back = History(points=4)
    assert back.restore(data) == (2, 0)
    assert back.export() == history.export()
    # A bound that holds one series keeps the one that moved last.
    one = len(orjson.dumps({"new": list(history.series["new"])}))
    data, left_out = history.saved(limit=one + 20)
    assert left_out == 1 and len(data) <= one + 20
    back = History(points=4)
    back.restore(data)
    assert list(back.series) == ["new"]
    # A file cut short (a disk full, say) keeps its whole lines.
    whole = history.saved()[0]
    back = History(points=4)
    assert back.restore(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 5]) == (1, 1)
    assert list(back.series) == ["new"]
    # Fewer points kept now than then: the newest stay.
    short = History(points=2)
    short.restore(history.saved()[0])
    assert list(short.series["old"]) == [(5.0, 5000, 0), (6.0, 6000, 0)]


def test_a_damaged_series_is_skipped_alone_and_a_damaged_file_leaves_the_history_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = {"a": [[1.0, 5, 0], [2, 7, 1]]}
    bad = {
        "b": [[2.0, 5, 0], [1.0, 7, 0]],  # time going back
        "c": [[1.0, -5, 0]],  # negative tokens
        "d": [[1.0, "5", 0]],  # a string for a count
        "e": [[1.0, 5.5, 0]],  # a fraction of a token
        "f": [[1.0, 5]],
        "g": [],
        "h": "points",
    }
    lines = [b'{"format":1}', orjson.dumps(good)]
    lines += [orjson.dumps({key: points}) for key, points in bad.items()]
    lines += [b'{"x": [[1.0, 5, 0]], "y": [[1.0, 5, 0]]}', b"[1, 2]", b'{"z": [[1.0, 5']
    history = History()
    taken = history.restore(b"\n".join(lines))
    assert taken == (1, 10)
    assert history.export() == {"a": [(1.0, 5, 0), (2.0, 7, 1)]}

    path = tmp_path / HISTORY_FILE
    for damaged in (b"\x00garbage{", b'{"format": 99}\n{"a": [[1.0, 5, 0]]}', b"[1, 2]"):
        path.write_bytes(damaged)
        history = History()
        anyio.run(load_history, history, path)
        assert history.export() == {}
    with path.open("wb") as f:  # sparse: past the bound without writing it
        f.truncate(HISTORY_FILE_MAX + 1)
    anyio.run(load_history, history, path)
    assert history.export() == {} and "larger than" in caplog.text
    path.unlink()
    os.mkfifo(path)  # a FIFO is refused, not waited on
    anyio.run(load_history, history, path)
    assert history.export() == {} and "FIFO" in caplog.text
    path.unlink()
    anyio.run(load_history, history, path)  # none: nothing to say
    assert history.export() == {}


def test_a_daemon_with_a_damaged_history_file_serves_and_writes_a_good_one(world: World) -> None:
    port = free_port()
    world.write_config(f"[http]\nenabled = true\nport = {port}\n")
    kept = world.state_file.parent / HISTORY_FILE
    kept.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    kept.write_bytes(b'{"format": 1' + b"9" * 4096)
    world.start()
    t = world.claude()
    t.assistant(120_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    world.wait_for(lambda: world.row(t), 5, "the session")
    assert "history not restored" in world.log()
    assert world.stop() == 0
    head, series, end = kept.read_bytes().split(b"\n")
    assert (orjson.loads(head), end) == ({"format": 1}, b"")
    assert orjson.loads(series)[str(t.path)][-1][1:] == [120_000, 0]


def _path(s: int) -> str:
    """A transcript path of the length a real one has (the series' key)."""
    return f"/home/dev/.claude/projects/-home-dev-work-project-{s % 40:03d}/{s:08d}-1dbc-4085.jsonl"


def test_a_full_chart_costs_a_few_kib_of_memory_json_included() -> None:
    """Bound: 12 KiB a session for 600 points, 30 KiB with the JSON the dashboard's answer
    keeps of them (a tuple of Python objects per point held 78 KiB of these, the JSON 16 more)."""
    sessions, points = 100, 600
    tracemalloc.start()
    try:
        history = History(points=points)
        for n in range(points):
            history.record(
                (_path(s), 1_780_000_000.123 + n, 20_000 + (n * 3_000 + s * 7) % 600_000, n // 200)
                for s in range(sessions)
            )
        held = tracemalloc.get_traced_memory()[0]
        answer = history.encoded()
        with_json = tracemalloc.get_traced_memory()[0] - len(answer)
    finally:
        tracemalloc.stop()
    assert all(len(series) == points for series in history.series.values())
    assert held / sessions < 12 * 1024
    assert with_json / sessions < 30 * 1024
    # Packed or not, the dashboard reads the same points.
    assert orjson.loads(answer)[_path(7)][-1] == [
        1_780_000_000.123 + 599,
        20_000 + 599 * 3_000 % 600_000 + 49,
        2,
    ]


def test_a_flood_of_20000_charted_sessions_keeps_the_points_bound_and_the_watched_charts() -> None:
    """At most 300,000 points in all (HISTORY_BUDGET), however many sessions move; the charts of
    the sessions that moved last stay whole. The clock is the test's."""
    bound, watched, flood = 300_000, [_path(-n) for n in range(1, 4)], 20_000
    history = History()
    clock = 1_780_000_000.0

    def tick(flooding: bool) -> None:
        nonlocal clock
        clock += 1.0
        samples: list[tuple[str, float, int | None, int]] = []
        if flooding:  # each flood session moves, a little apart, before the watched ones
            samples += [
                (_path(s), clock + s / 40_000, 1_000 + int(clock) % 97 + s, 0) for s in range(flood)
            ]
        samples += [(key, clock + 0.9, int(clock) % 1_000 * 100, 0) for key in watched]
        history.record(samples)
        held = sum(len(series) for series in history.series.values())
        assert held <= bound

    for _ in range(600):  # the watched sessions fill their charts
        tick(flooding=False)
    for _ in range(40):  # 800,000 points offered
        tick(flooding=True)
    assert len(history.series) > 1_000  # the flood was charted, thinned, not refused
    for key in watched:
        points = list(history.series[key])
        assert len(points) == 600 and points[-1][0] == clock + 0.9
