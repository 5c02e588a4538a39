"""CPU seconds one agent's reader spends on a large generated transcript, against another version
of the same reader (its `transcript.py` from another checkout, e.g. a worktree at main).

    .venv/bin/python bench/reader_cpu.py copilot ../main/ctxd/agents/copilot/transcript.py

The file is built by `replay_bench.build` (100 MB by default) and fed in 1 MiB chunks, as the
daemon reads; the two readers alternate, five runs each, and the median is printed. CPU time
(`time.process_time`) rather than wall time: on a shared machine it moves far less.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import replay_bench  # noqa: E402

from ctxd.agents import spec as agent_spec  # noqa: E402

CHUNK = 1 << 20


def _reader_class(path: str) -> Any:
    loaded = importlib.util.spec_from_file_location("other_reader", path)
    assert loaded is not None and loaded.loader is not None, path
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    classes = [v for k, v in vars(module).items() if k.endswith("Reader") and isinstance(v, type)]
    (reader,) = [c for c in classes if c.__module__ == "other_reader"]
    return reader


def _cpu_seconds(make: Any, path: Path) -> float:
    reader = make()
    started = time.process_time()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            reader.feed(chunk)
    return time.process_time() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("agent", choices=list(replay_bench.GENERATORS))
    parser.add_argument("other", help="the other version's transcript.py")
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    other = _reader_class(args.other)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "transcript.jsonl"
        size, _ = replay_bench.build(args.agent, path, args.mb * replay_bench.MB)
        this = lambda: agent_spec(args.agent).open_reader(None)  # noqa: E731
        runs: dict[str, list[float]] = {"this checkout": [], args.other: []}
        for _ in range(args.runs):
            runs[args.other].append(_cpu_seconds(other, path))
            runs["this checkout"].append(_cpu_seconds(this, path))
    print(f"{args.agent}, {size / replay_bench.MB:.0f} MB, {args.runs} runs each (CPU s, median)")
    for name, seconds in runs.items():
        median = statistics.median(seconds)
        print(f"  {name}: {median:.3f} s, {size / replay_bench.MB / median:.0f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
