"""What `ctxd replay` of a large `opencode export` costs: the export the real CLI 1.18.33 made of
the captured "compact" session (tests/data/transcripts/opencode-1.18.33/export.compact.json), its
messages repeated (part ids made unique, each tool's output padded to `--pad` characters) until
the document holds `--messages` messages, written indented as OpenCode writes it. Times the export
reader alone (fed 1 MiB chunks, as replay feeds it) and the whole `ctxd replay --json` process
(wall time and peak RSS).

    .venv/bin/python bench/opencode_export.py [--messages 5000] [--pad 20000]
"""

from __future__ import annotations

import argparse
import copy
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from ctxd.agents.opencode_family.export import ExportReader

EXPORT = Path(__file__).parents[1] / "tests/data/transcripts/opencode-1.18.33/export.compact.json"


def build(messages: int, pad: int) -> bytes:
    doc = orjson.loads(EXPORT.read_bytes())
    model: list[dict[str, Any]] = doc["messages"]
    out: list[dict[str, Any]] = []
    while len(out) < messages:
        for message in model[: messages - len(out)]:
            m = copy.deepcopy(message)
            for part in m["parts"]:
                part["id"] = f"{part.get('id')}-{len(out)}"
                if part.get("type") == "tool":
                    part["state"]["output"] = "x" * pad
            out.append(m)
    doc["messages"] = out
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--pad", type=int, default=20_000)
    args = parser.parse_args()
    data = build(args.messages, args.pad)
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        path = Path(tmp) / "export.json"
        path.write_bytes(data)
        start = time.perf_counter()
        reader, steps = ExportReader(str(path)), 0
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                steps += len(reader.feed(chunk))
        read_s = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "ctxd", "replay", "--json", str(path)],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        replay_s = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"{len(data) / 2**20:.1f} MiB, {args.messages:,} messages, {steps:,} steps: "
        f"reader {read_s:.2f} s; ctxd replay --json {replay_s:.2f} s, peak RSS {rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
