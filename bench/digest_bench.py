"""Benchmark: what the session digest costs.

1. Upkeep: each transcript is replayed in 1 MiB reads by a fresh child process twice, with the
   usage reader alone and with the digest kept too, as the daemon's `TranscriptFile` does (the
   reader given the digest's facts as its listener, in its one pass); the digest's share is the
   difference. Transcripts: real sessions, every public transcript of the agent in
   tests/data/public repeated (Claude Code 1.0.51-2.1.114 and Codex CLI 0.39-0.104 sessions,
   and the Gemini CLI session replay_bench.py uses), which the ≤ 10 % target is measured on;
   and, reported as stress cases, the real CLIs' sessions against the mock model: replay_bench's
   (Claude Code 2.1.332, Codex CLI 0.171.0) and tool-heavy ones from the continuity captures
   (Read, Edit, Write, failing Bash, tasks; apply_patch, update_plan; read_file, replace,
   write_todos), whose tools answer in a few bytes. Ids are made unique per round. Each mode
   runs --runs times, alternating; the fastest run counts.
2. Memory: a real `ctxd serve` tracking --sessions Claude Code transcripts, each with
   --calls tool calls (the continuity capture's tool lines, its big request blobs left out,
   paths and ids made unique, so that every session's digest fills up to its bounds); RSS
   once all are read.

3. Bytecodes (--bytecodes): the same replays of the real sessions counted in CPython bytecodes
   executed (sys.settrace opcode events), usage alone and with the digest, with the functions
   that the digest adds most to. A count, not a time: the same on any machine and under any
   load, so a change's effect on the digest's own work shows without noise.

Targets: digest upkeep ≤ 10 % of replay throughput on real sessions; RSS ≤ 60 MB with 1,000
sessions.

    .venv/bin/python bench/digest_bench.py [--size-mb 100] [--runs 3] [--sessions 1000]
    .venv/bin/python bench/digest_bench.py --in-process --size-mb 20 --runs 9 --skip-memory
    .venv/bin/python bench/digest_bench.py --bytecodes --size-mb 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import common as c
import replay_bench as rb

from ctxd.agents import spec as agent_spec
from ctxd.agents.reader import NO_FACTS

TARGET_SHARE = 10.0
#: Real sessions (tests/data/public): the target's measure.
REAL = ["claude-public", "codex-public", "gemini"]
#: The real CLIs' sessions against the mock model (tests/data/transcripts): their tools answer in
#: a few bytes, so a fact comes every 1-3 KB; reported, not a target.
CAPTURES = ["claude", "codex", "claude-tools", "codex-tools", "gemini-tools"]
TARGET_RSS_MB = 60.0
CHUNK = 1 << 20
CONTINUITY = {
    "claude": rb.DATA / "claude-code-2.1.332" / "transcript.continuity.jsonl",
    "codex": rb.DATA / "codex-cli-0.171.0" / "rollout.continuity.jsonl",
    "gemini": rb.DATA / "gemini-cli-0.61.0" / "transcript.continuity.1.jsonl",
}
#: The id prefixes each capture's mock wrote, replaced per round.
ID_PREFIXES = {
    "claude": (b"toolu_mock", b"msg_mock"),
    "codex": (b"call_mock", b"resp_mock", b"msg_mock", b"fc_mock", b"ctc_mock"),
    "gemini": (b'"id":"',),
}


def _tool_rounds(agent: str) -> Callable[[], Iterator[list[bytes]]]:
    def rounds() -> Iterator[list[bytes]]:
        lines = CONTINUITY[agent].read_bytes().splitlines()
        n = 0
        while True:
            out = []
            for line in lines:
                for prefix in ID_PREFIXES[agent]:
                    line = line.replace(prefix, prefix + f"r{n}_".encode())
                out.append(line.replace(b"app.py", f"app_{n % 97}.py".encode()))
            yield out
            n += 1

    return rounds


for _agent in CONTINUITY:
    rb.GENERATORS[f"{_agent}-tools"] = _tool_rounds(_agent)

#: The keys whose values are ids (of messages, tool calls, lines), made unique per round.
ID_KEYS = (
    b'"id":"',
    b'"tool_use_id":"',
    b'"call_id":"',
    b'"uuid":"',
    b'"parentUuid":"',
    b'"leafUuid":"',
    b'"$rewindTo":"',
    b'"sourceToolAssistantUUID":"',
)


def _public_rounds(agent: str) -> Callable[[], Iterator[list[bytes]]]:
    """Rounds of every public real session of `agent` in tests/data/public (sources in its
    README), one after the other, ids made unique per round."""

    def rounds() -> Iterator[list[bytes]]:
        files = sorted((rb.PUBLIC / agent).rglob("*.jsonl"))
        lines = [line for f in files for line in f.read_bytes().splitlines()]
        n = 0
        while True:
            out = []
            for line in lines:
                for key in ID_KEYS:
                    line = line.replace(key, key + f"r{n}-".encode())
                out.append(line)
            yield out
            n += 1

    return rounds


for _agent in ("claude", "codex"):  # Gemini's replay_bench shape is its public session already
    rb.GENERATORS[f"{_agent}-public"] = _public_rounds(_agent)


# --------------------------------------------------------------------------- replay (child)


def replay(agent: str, path: Path, digest: bool) -> dict[str, float]:
    s = agent_spec(agent)
    # As `TranscriptFile` does: the digest's facts are the reader's listener.
    facts = s.open_facts(str(path)) if digest else None
    reader = s.open_reader(str(path), facts or NO_FACTS)
    total = 0
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while data := os.read(fd, CHUNK):
            total += len(data)
            reader.feed(data)
    finally:
        os.close(fd)
    seconds = time.perf_counter() - started
    calls = facts.digest.tool_calls if facts is not None else 0
    return {"bytes": total, "seconds": seconds, "tool_calls": calls}


def _child(*args: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def upkeep(size_mb: int, runs: int, in_process: bool = False) -> list[list[object]]:
    rows: list[list[object]] = []
    kinds = [*REAL, *CAPTURES]
    with tempfile.TemporaryDirectory(prefix="ctxd-digest-") as tmp:
        for kind in kinds:
            agent = kind.split("-")[0]
            path = Path(tmp) / f"{kind}.jsonl"
            written, _ = rb.build(kind, path, size_mb * rb.MB)
            path.read_bytes()  # in the page cache for both modes alike
            alone, both = [], []
            calls = 0.0
            for _ in range(runs):
                if in_process:  # quicker, and steadier for small differences: no start-up
                    alone.append(replay(agent, path, False)["seconds"])
                    m = replay(agent, path, True)
                else:
                    alone.append(_child("--replay", agent, str(path), "usage")["seconds"])
                    m = _child("--replay", agent, str(path), "digest")
                both.append(m["seconds"])
                calls = m["tool_calls"]
            a, b = min(alone), min(both)
            share = (b - a) / a * 100
            rows.append(
                [
                    kind,
                    f"{written / rb.MB:.0f}",
                    f"{int(calls):,}",
                    f"{written / rb.MB / a:.0f}",
                    f"{written / rb.MB / b:.0f}",
                    f"{share:+.1f} %",
                    c.verdict(share <= TARGET_SHARE) if kind in REAL else "(stress)",
                ]
            )
            path.unlink()
    return rows


# --------------------------------------------------------------------------- bytecodes


def bytecodes(agent: str, path: Path, digest: bool) -> Counter[str]:
    """Bytecodes executed per function while `replay` reads `path` (its set-up excluded)."""
    counts: Counter[str] = Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            counts[frame.f_code.co_qualname] += 1
        return trace

    s = agent_spec(agent)
    facts = s.open_facts(str(path)) if digest else None
    reader = s.open_reader(str(path), facts or NO_FACTS)
    chunks = [path.read_bytes()[i : i + CHUNK] for i in range(0, path.stat().st_size, CHUNK)]
    sys.settrace(trace)
    try:
        for data in chunks:
            reader.feed(data)
    finally:
        sys.settrace(None)
    return counts


def bytecode_rows(size_mb: int) -> list[list[object]]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(prefix="ctxd-digest-") as tmp:
        for kind in REAL:
            agent = kind.split("-")[0]
            path = Path(tmp) / f"{kind}.jsonl"
            rb.build(kind, path, size_mb * rb.MB)
            alone, both = bytecodes(agent, path, False), bytecodes(agent, path, True)
            a, b = sum(alone.values()), sum(both.values())
            added = both.copy()
            added.subtract(alone)
            # The digest's loop replaces the usage-only one: both show, with their signs.
            most = sorted(added.items(), key=lambda item: -abs(item[1]))[:5]
            top = ", ".join(f"{name} {n / 1000:+,.0f}k" for name, n in most)
            rows.append([kind, f"{a:,}", f"{b:,}", f"{(b - a) / a * 100:+.1f} %", top])
            path.unlink()
    return rows


# --------------------------------------------------------------------------- memory


def session_content(calls: int) -> bytes:
    """A Claude Code transcript with `calls` tool calls: the continuity capture without its big
    lines, its tool-call lines repeated with unique ids and paths."""
    lines = c.small_transcript(CONTINUITY["claude"]).splitlines(keepends=True)
    head = [ln for ln in lines if b'"tool_use' not in ln]
    tools = [ln for ln in lines if b'"tool_use' in ln]
    per_round = sum(1 for ln in tools if b'"type":"tool_use"' in ln) or 1
    out = list(head)
    n = 0
    while n * per_round < calls:
        tag = f"r{n}_".encode()
        for ln in tools:
            ln = ln.replace(b"toolu_mock", b"toolu_mock" + tag).replace(b"msg_mock", b"msg_" + tag)
            ln = ln.replace(b"NOTES.md", f"NOTES_{n}.md".encode())
            out.append(ln.replace(b"app.py", f"app_{n}.py".encode()))
        n += 1
    return b"".join(out)


def memory(sessions: int, calls: int) -> list[list[object]]:
    content = session_content(calls)
    claude = agent_spec("claude")
    sample = claude.open_facts(None)
    assert sample is not None
    claude.open_reader(None, sample).feed(content)
    digest = sample.digest
    with c.sandbox("digest") as box, c.running_daemon(box) as daemon:
        time.sleep(2)
        empty = c.proc_memory_kib(daemon.pid)
        cwds = [f"/home/user/src/project-{i:03d}" for i in range(100)]
        for cwd in cwds:
            (box.claude_projects / c.claude_slug(cwd)).mkdir(parents=True, exist_ok=True)
        time.sleep(0.5)
        started = time.monotonic()
        for i in range(sessions):
            c.place_claude_transcript(box, content, str(uuid.uuid4()), cwds[i % len(cwds)])
        found, _ = c.wait_sessions(box, sessions, timeout=120)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            rows = c.status(box)["sessions"]
            if len(rows) >= sessions and not any(r.get("catching_up") for r in rows):
                break
            time.sleep(0.5)
        read_s = time.monotonic() - started
        time.sleep(3)
        loaded = c.proc_memory_kib(daemon.pid)
    rss_mb = loaded["VmRSS"] * 1024 / 1e6
    per = (loaded["VmRSS"] - empty["VmRSS"]) / max(found, 1)
    print(
        f"{found:,} sessions of {len(content) / 1024:.0f} KiB, {digest.tool_calls} tool calls "
        f"each (digest: {len(digest.files)} files kept + {digest.files_dropped} dropped, "
        f"{len(digest.commands)} commands, {len(digest.failed)} failed, "
        f"{len(digest.todos or ())} todos), read in {read_s:.1f} s; "
        f"≈ {per:.1f} KiB RSS per session; empty daemon {empty['VmRSS'] / 1024:.1f} MiB"
    )
    return [
        [
            f"RSS ≤ 60 MB with {sessions:,} sessions of {calls} tool calls",
            f"{rss_mb:.1f} MB ({loaded['VmRSS'] / 1024:.1f} MiB; VmHWM "
            f"{loaded['VmHWM'] / 1024:.1f} MiB)",
            c.verdict(rss_mb <= TARGET_RSS_MB and found >= sessions),
        ]
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--skip-upkeep", action="store_true")
    parser.add_argument(
        "--in-process", action="store_true", help="replay in this process, not a fresh one each"
    )
    parser.add_argument("--bytecodes", action="store_true", help="count bytecodes, then stop")
    parser.add_argument("--replay", nargs=3, metavar=("AGENT", "PATH", "MODE"))
    args = parser.parse_args()
    if args.replay:
        agent, path, mode = args.replay
        print(json.dumps(replay(agent, Path(path), mode == "digest")))
        return 0
    c.header("Session digest", " ".join([".venv/bin/python bench/digest_bench.py", *sys.argv[1:]]))
    if args.bytecodes:
        heads = ["transcript", "bytecodes usage", "usage+digest", "added", "added most in"]
        print(c.table(heads, bytecode_rows(args.size_mb)))
        return 0
    rows = [] if args.skip_upkeep else upkeep(args.size_mb, args.runs, args.in_process)
    print(
        c.table(
            [
                "transcript",
                "MB",
                "tool calls",
                "MB/s usage",
                "MB/s usage+digest",
                "digest share",
                "≤ 10 %",
            ],
            rows,
        )
    )
    if not args.skip_memory:
        print()
        checks = memory(args.sessions, args.calls)
        print(c.table(["target", "measured", "verdict"], checks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
