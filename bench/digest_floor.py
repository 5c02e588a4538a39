"""Where the Claude Code digest's upkeep goes (issue 14): a decomposition, not a target.

The claude-public file of digest_bench.py (every public Claude Code transcript, ids made unique
per round) is replayed in one process, 1 MiB reads, best of --runs, by the usage reader
carrying:

- nothing (usage alone: the baseline);
- a skeleton: the least a digest riding on the reader could do per fact, with none of the
  digest's rules: a tool call's id, name and input read and the call remembered, a file's
  count or a command appended to plain containers, the newest reply kept, an id-first result's
  call dropped. No bounds, no failures, no todos, no requests, no type checks;
- the real `ClaudeFacts`, with the `DigestBook`'s fold methods made no-ops (what reading the
  facts out of the lines costs);
- the real `ClaudeFacts` (what the digest costs);
- the same digest with its hot rules fused into the reader's loop (`digest_fused.py`): the
  cheapest CPython we found for exactly these rules, checked to give the same digest and
  updates first; and that loop without the facts, as a usage reader (how much of its saving
  is the usage side's).

    .venv/bin/python bench/digest_floor.py [--size-mb 20] [--runs 11]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import common as c
import digest_bench  # noqa: F401  (registers the claude-public generator)
import digest_fused
import replay_bench as rb

from ctxd.agents.claude import digest as claude_digest
from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.core.digest import DigestBook

_RESULT_HEAD = claude_digest._USER_CONTENT + claude_digest._ID_FIRST_LIST
_FILE_COLUMNS = {"Read": 0, "Edit": 1, "MultiEdit": 1, "NotebookEdit": 1, "Write": 2}
_FOLDS = ("ask", "reply", "touch", "command", "ran", "result", "todos", "todo", "subagent", "tool")


class SkeletonFacts(claude_digest.ClaudeFacts):
    """The skeleton above: a lower bound, not a digest."""

    __slots__ = ("commands", "files", "last_reply")

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[object, list[int]] = {}
        self.commands: list[object] = []
        self.last_reply: object = None

    def take_user(self, line: bytes, kind: int) -> None:
        at = kind + len(claude_digest._USER_CONTENT)
        if line.startswith(_RESULT_HEAD, kind):
            at += len(claude_digest._ID_FIRST_LIST)
            self.pending.pop(line[at : line.find(b'"', at)].decode(), None)

    def take_assistant(self, content: object) -> list[str] | None:
        folded = None
        for block in content if isinstance(content, list) else ():
            kind = block.get("type")
            if kind == "tool_use":
                call_id, name, args = block["id"], block["name"], block["input"]
                self.pending[call_id] = (name, "")
                column = _FILE_COLUMNS.get(name)
                if column is not None:
                    self.files.setdefault(args.get("file_path"), [0, 0, 0])[column] += 1
                elif name == "Bash":
                    self.commands.append(args.get("command"))
                folded = [call_id]
            elif kind == "text":
                self.last_reply = block.get("text")
        return folded

    def take_unjudged(self, line: bytes) -> None:
        pass

    def flush(self) -> None:
        self._asks.clear()


def _replay(path: Path, facts: Callable[[], claude_digest.ClaudeFacts] | None) -> float:
    return _timed(path, ClaudeReader() if facts is None else ClaudeReader(False, facts()))


def _timed(path: Path, reader: ClaudeReader) -> float:
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while data := os.read(fd, 1 << 20):
            reader.feed(data)
    finally:
        os.close(fd)
    return time.perf_counter() - started


def _without_folds(path: Path) -> float:
    saved = {name: getattr(DigestBook, name) for name in _FOLDS}
    try:
        for name in _FOLDS:
            setattr(DigestBook, name, lambda self, *args, **kwargs: None)
        return _replay(path, claude_digest.ClaudeFacts)
    finally:
        for name, method in saved.items():
            setattr(DigestBook, name, method)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=20)
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    command = " ".join([".venv/bin/python bench/digest_floor.py", *sys.argv[1:]])
    c.header("Claude Code digest: where the upkeep goes", command)
    modes: dict[str, Callable[[Path], float]] = {
        "usage alone": lambda p: _replay(p, None),
        "+ skeleton (a lower bound)": lambda p: _replay(p, SkeletonFacts),
        "+ facts read, book folds no-ops": _without_folds,
        "+ digest (real)": lambda p: _replay(p, claude_digest.ClaudeFacts),
        "+ digest, its hot rules fused into the loop": lambda p: _timed(
            p, digest_fused.FusedReader()
        ),
        "that fused loop without the facts (usage alone)": lambda p: _timed(
            p, digest_fused.FusedUsageReader()
        ),
    }
    with tempfile.TemporaryDirectory(prefix="ctxd-floor-") as tmp:
        path = Path(tmp) / "claude-public.jsonl"
        written, _ = rb.build("claude-public", path, args.size_mb * rb.MB)
        differ = digest_fused.check([path])
        if differ:
            print("the fused reader's digest or updates differ from the real ones on:")
            print("\n".join(f"- {where}" for where in differ))
            return 1
        times: dict[str, list[float]] = {name: [] for name in modes}
        for _ in range(args.runs):  # the modes interleaved: a slow moment hits them alike
            for name, run in modes.items():
                times[name].append(run(path))
        best = {name: min(runs) for name, runs in times.items()}
    alone = best["usage alone"]
    rows = [
        [name, f"{seconds * 1000:.1f}", f"{(seconds - alone) / alone * 100:+.1f} %"]
        for name, seconds in best.items()
    ]
    print(f"{written / rb.MB:.0f} MB, best of {args.runs}\n")
    print(c.table(["reader carrying", "ms", "vs usage alone"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
