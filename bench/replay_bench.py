"""Replay benchmark for the incremental transcript readers.

Builds large transcripts from the real line shapes in tests/data/transcripts (Claude Code 2.1.332
with its 38-57 KB request-shape and prompt-snapshot lines, Codex CLI 0.171.0) and
tests/data/public (a Gemini CLI recording with 2-55 KB message lines), Copilot CLI 1.0.102,
with usage that grows from turn to turn, in a temporary directory. Each file is then replayed by a
fresh child process that reads it in 1 MiB chunks, as the daemon does, and reports throughput
and peak RSS. Peak RSS is compared across file sizes: it is bounded by the largest line and the
chunk size, not by the file.

    .venv/bin/python bench/replay_bench.py          # claude, codex, gemini at 100 and 400 MB
    .venv/bin/python bench/replay_bench.py --agents claude --sizes 100 400 --huge-line-mb 32

This is a script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ctxd.agents import spec as agent_spec  # noqa: E402
from ctxd.core.events import UsageUpdate  # noqa: E402

DATA = ROOT / "tests" / "data" / "transcripts"
PUBLIC = ROOT / "tests" / "data" / "public"
MB = 1_000_000
CHUNK = 1 << 20


# --------------------------------------------------------------------------- generators


def _claude_rounds() -> Iterator[list[bytes]]:
    """Rounds of a Claude Code 2.1.332 session: the compact sample's lines, usage growing."""
    template = (DATA / "claude-code-2.1.332" / "transcript.compact.jsonl").read_bytes()
    lines = template.splitlines()
    round_no = 0
    while True:
        out: list[bytes] = []
        for index, line in enumerate(lines):
            if b'"type":"assistant"' in line:
                record = orjson.loads(line)
                message = record["message"]
                message["id"] = f"msg_r{round_no}_{index}"
                # Grows through the round, then starts over, like a session that compacts.
                message["usage"]["cache_read_input_tokens"] = (round_no % 90) * 10_000 + index
                line = orjson.dumps(record)
            out.append(line)
        yield out
        round_no += 1


def _codex_rounds() -> Iterator[list[bytes]]:
    """Rounds of a Codex CLI 0.171.0 rollout (auto-compaction sample), unique response ids."""
    lines = (DATA / "codex-cli-0.171.0" / "rollout.autocompact.jsonl").read_bytes().splitlines()
    round_no = 0
    while True:
        tag = f"resp_r{round_no}_".encode()
        yield [line.replace(b"resp_mock", tag) for line in lines]
        round_no += 1


def _gemini_rounds() -> Iterator[list[bytes]]:
    """Rounds of a real Gemini CLI chat recording (tests/data/public: 134 KB, gemini message lines
    of 2-55 KB with thoughts and tool calls, `$set` and info lines), unique ids per round."""
    lines = (PUBLIC / "gemini" / "chats" / "session-2026-04-23-jsonl.jsonl").read_bytes()
    round_no = 0
    while True:
        tag = f'"id":"r{round_no}-'.encode()
        rewind = f'"$rewindTo":"r{round_no}-'.encode()
        yield [
            line.replace(b'"id":"', tag).replace(b'"$rewindTo":"', rewind)
            for line in lines.splitlines()
        ]
        round_no += 1


def _copilot_rounds() -> Iterator[list[bytes]]:
    """Rounds of the Copilot CLI 1.0.102 capture with compaction (system prompts of 20 KB, hook,
    tool, usage and compaction events), unique event ids and growing prompts per round."""
    lines = (DATA / "copilot-1.0.102" / "transcript.compact.jsonl").read_bytes().splitlines()
    round_no = 0
    while True:
        tag = f'"id":"r{round_no}-'.encode()
        grown = f"\"inputTokens\":{round_no % 90 + 1}".encode()
        yield [line.replace(b'"id":"', tag).replace(b'"inputTokens":', grown) for line in lines]
        round_no += 1


def _pi_rounds() -> Iterator[list[bytes]]:
    """Rounds of a pi 1.6.0 session (the `compact` capture: 10 KB bash results, system message
    entries; its compaction left out), unique entry ids per round: the reader sizes every
    message entry, for the estimates after a compaction or a context edit."""
    lines = (DATA / "pi-1.6.0" / "session.compact.jsonl").read_bytes().splitlines()[1:]
    lines = [line for line in lines if not line.startswith(b'{"type":"compaction"')]
    round_no = 0
    while True:
        tag = f'"id":"r{round_no}-'.encode()
        yield [line.replace(b'"id":"', tag, 1) for line in lines]
        round_no += 1


GENERATORS: dict[str, Callable[[], Iterator[list[bytes]]]] = {
    "claude": _claude_rounds,
    "codex": _codex_rounds,
    "gemini": _gemini_rounds,
    "copilot": _copilot_rounds,
    "pi": _pi_rounds,
}


def _huge_line(size: int) -> bytes:
    """One Claude-style attachment line of about `size` bytes (a pasted file, say)."""
    head = b'{"type":"attachment","attachment":{"type":"file","content":"'
    tail = b'"},"sessionId":"bench","uuid":"huge"}'
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


def build(agent: str, path: Path, size: int, huge_line: int = 0) -> tuple[int, int]:
    """Write at least `size` bytes of `agent` transcript to `path`; (bytes, longest line).

    With `huge_line`, one line of that many bytes is written halfway through.
    """
    written = longest = 0
    with path.open("wb") as out:
        for lines in GENERATORS[agent]():
            if huge_line and written >= size // 2:
                lines = [*lines[:1], _huge_line(huge_line), *lines[1:]]
                huge_line = 0
            block = b"\n".join(lines) + b"\n"
            out.write(block)
            written += len(block)
            longest = max(longest, *(len(line) + 1 for line in lines))
            if written >= size:
                return written, longest
    raise AssertionError("generators never end")


# --------------------------------------------------------------------------- replay (child)


def _rss_kib() -> int:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


def replay(agent: str, path: Path, chunk: int) -> dict[str, object]:
    """Feed `path` to a fresh reader in `chunk`-byte reads; the measurements as a dict."""
    reader = agent_spec(agent).open_reader(None)
    baseline = _rss_kib()
    updates = 0
    last: UsageUpdate | None = None
    total = 0
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while data := os.read(fd, chunk):
            total += len(data)
            batch = reader.feed(data)
            if batch:
                updates += len(batch)
                last = batch[-1]
    finally:
        os.close(fd)
    seconds = time.perf_counter() - started
    return {
        "agent": agent,
        "bytes": total,
        "seconds": seconds,
        "mb_per_s": total / MB / seconds,
        "updates": updates,
        "final_tokens": last.tokens if last else None,
        "baseline_rss_kib": baseline,
        "peak_rss_kib": _rss_kib(),
    }


# --------------------------------------------------------------------------- driver


def _run_child(*args: str) -> dict[str, object]:
    # Building and replaying each run in its own process keeps every peak RSS that replay's own.
    # This process must stay small too: Linux carries ru_maxrss over fork and exec.
    command = [sys.executable, __file__, *args]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    measured: dict[str, object] = json.loads(result.stdout)
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--agents", nargs="+", choices=list(GENERATORS), default=list(GENERATORS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 400], help="MB per file")
    parser.add_argument("--chunk", type=int, default=CHUNK, help="bytes per read (1 MiB)")
    parser.add_argument(
        "--huge-line-mb",
        type=int,
        default=0,
        help="also replay each file with one line of this many MB in it",
    )
    parser.add_argument("--replay", nargs=2, metavar=("AGENT", "PATH"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--build", nargs=4, metavar=("AGENT", "PATH", "SIZE", "HUGE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)

    if args.replay:
        agent, path = args.replay
        print(json.dumps(replay(agent, Path(path), args.chunk)))
        return 0
    if args.build:
        agent, path, size, huge_line = args.build
        written, longest = build(agent, Path(path), int(size), int(huge_line))
        print(json.dumps({"bytes": written, "longest": longest}))
        return 0

    print(f"python {sys.version.split()[0]}, chunk {args.chunk} bytes, cpu {os.cpu_count()}")
    print(
        "agent   size_MB  longest_line_KB  MB/s    updates  final_tokens"
        "  rss_base_MiB  rss_peak_MiB"
    )
    huge = [0, args.huge_line_mb * MB] if args.huge_line_mb else [0]
    with tempfile.TemporaryDirectory(prefix="ctxd-bench-") as tmp:
        for agent in args.agents:
            for size in args.sizes:
                for huge_line in huge:
                    path = Path(tmp) / f"{agent}-{size}.jsonl"
                    built = _run_child("--build", agent, str(path), str(size * MB), str(huge_line))
                    written, longest = int(str(built["bytes"])), int(str(built["longest"]))
                    m = _run_child("--replay", agent, str(path), "--chunk", str(args.chunk))
                    print(
                        f"{agent:<7} {written / MB:>7.0f}  {longest / 1024:>15.1f}  "
                        f"{m['mb_per_s']:>6.0f}  {m['updates']:>8}  {m['final_tokens']!s:>12}  "
                        f"{int(str(m['baseline_rss_kib'])) / 1024:>12.1f}  "
                        f"{int(str(m['peak_rss_kib'])) / 1024:>12.1f}"
                    )
                    path.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
