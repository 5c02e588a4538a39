"""Benchmark 30: the dashboard's history kept across restarts, and the page's weight.

For N sessions all moving for HISTORY_POINTS ticks (a realistic shape: a second apart, the
context growing by a few thousand tokens a point, a compaction now and then), measures in
process: the points kept (all series together are bounded by HISTORY_BUDGET), the memory the
series hold (tracemalloc) and with the JSON the dashboard's answer keeps of them
(`History.encoded`), the slowest `History.record` of a tick (where the series idle longest are
cut), `History.saved()` (the bytes written at each save, on the event loop) and its size
against HISTORY_FILE_MAX, how many series it leaves out, and `load_history` of that file as the
daemon's start does it (read in a worker thread, taken in on the event loop in slices; the
series measured before are let go first, and the collector set as the daemon sets it), with
the longest the event loop waited meanwhile (a task ticking every 1 ms); and, for the file,
the time of its parse, of the points checked by hand (as `History.restore` does) and of the
same read by declared types (`ctxd.daemon.typed.from_plain`). Then the page's bytes.

    .venv/bin/python bench/dashboard_history.py [--sessions 100 500 2000 10000]
"""

from __future__ import annotations

import argparse
import gc
import importlib.resources
import statistics
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import anyio
import orjson

from ctxd.daemon import history as history_module
from ctxd.daemon.history import (
    HISTORY_FILE_MAX,
    HISTORY_POINTS,
    History,
    _points,
    load_history,
)
from ctxd.daemon.typed import from_plain


def filled(sessions: int) -> tuple[History, float]:
    """The history after HISTORY_POINTS ticks of `sessions` all moving, and its slowest tick."""
    history = History()
    start = 1_780_000_000.0
    keys = [
        f"/home/dev/.claude/projects/-home-dev-work-project-{s % 40:03d}/"
        f"{s:08d}-1dbc-4085-bfe2-3aea289cc05b.jsonl"
        for s in range(sessions)
    ]
    slowest = 0.0
    for n in range(HISTORY_POINTS):
        at = start + n + 0.123
        samples = [
            (key, at, 20_000 + (n * 3_000 + s * 7) % 600_000, n // 200)
            for s, key in enumerate(keys)
        ]
        t = time.perf_counter()
        history.record(samples)
        slowest = max(slowest, time.perf_counter() - t)
    return history, slowest


def timed(fn, runs: int = 3):  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


@dataclass(frozen=True)
class Typed:
    """A series as `typed` would read it."""

    key: str
    points: tuple[tuple[float, int, int], ...]


def checks(data: bytes) -> tuple[float, float, float]:
    """Seconds to parse the file's lines, to check their points by hand, to read them typed."""
    lines = data.split(b"\n")[1:-1]
    t = time.perf_counter()
    docs = [orjson.loads(line) for line in lines]
    parsed = time.perf_counter()
    for doc in docs:
        ((_, points),) = doc.items()
        _points(points, HISTORY_POINTS)
    by_hand = time.perf_counter()
    for doc in docs:
        ((key, points),) = doc.items()
        from_plain(Typed, {"key": key, "points": points})
    return parsed - t, by_hand - parsed, time.perf_counter() - by_hand


def load_in_thread(path: Path) -> tuple[float, float]:
    """`load_history`: its wall time and the event loop's longest wait meanwhile."""
    gaps: list[float] = []

    async def run() -> float:
        done = False

        async def tick() -> None:
            last = time.perf_counter()
            while not done:
                await anyio.sleep(0.001)
                gaps.append(time.perf_counter() - last)
                last = time.perf_counter()

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            t = time.perf_counter()
            await load_history(History(), path)
            took = time.perf_counter() - t
            done = True
        return took

    took = anyio.run(run)
    return took, max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, nargs="+", default=[100, 500, 2000, 10000])
    args = parser.parse_args()
    budget = getattr(history_module, "HISTORY_BUDGET", None)  # None: before the bound
    print(f"HISTORY_POINTS={HISTORY_POINTS} HISTORY_FILE_MAX={HISTORY_FILE_MAX} budget={budget}")
    print(
        "| sessions | points kept | series in memory | per 600 points | with the JSON "
        "| slowest tick | saved() | file | left out | load | longest loop wait |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    check_lines: list[str] = []
    for sessions in args.sessions:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        history, _ = filled(sessions)
        held = tracemalloc.get_traced_memory()[0] - base
        answer = history.encoded()
        with_json = tracemalloc.get_traced_memory()[0] - base - len(answer)
        del answer
        tracemalloc.stop()
        points = sum(len(series) for series in history.series.values())
        del history
        gc.collect()
        history, slowest = filled(sessions)
        save_s, (data, left_out) = timed(history.saved)
        del history
        gc.collect()
        gc.freeze()  # as the daemon does with what it holds at start
        gc.set_threshold(50_000, 20, 100)
        with tempfile.TemporaryDirectory(dir=Path(__file__).parent) as folder:
            path = Path(folder) / "history.json"
            path.write_bytes(data)
            load_s, gap = load_in_thread(path)
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)
        parse_s, hand_s, typed_s = checks(data)
        check_lines.append(
            f"{sessions:,} sessions: parse {parse_s * 1000:.0f} ms, points checked by hand "
            f"{hand_s * 1000:.0f} ms, read by declared types {typed_s * 1000:.0f} ms"
        )
        full = HISTORY_POINTS / points  # per chart of HISTORY_POINTS points
        print(
            f"| {sessions:,} | {points:,} | {held / 2**20:.1f} MiB | {held * full / 1024:.1f} KiB "
            f"| {with_json / 2**20:.1f} MiB | {slowest * 1000:.0f} ms "
            f"| {save_s * 1000:.0f} ms | {len(data) / 2**20:.2f} MiB | {left_out:,} "
            f"| {load_s * 1000:.0f} ms | {gap * 1000:.0f} ms |"
        )
    print("\n".join(check_lines))
    page = importlib.resources.files("ctxd.daemon").joinpath("dashboard.html").read_bytes()
    print(f"dashboard.html: {len(page):,} bytes")


if __name__ == "__main__":
    main()
