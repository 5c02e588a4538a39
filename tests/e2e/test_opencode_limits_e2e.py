"""OpenCode's own model limits (opencode.json), against the real CLI: where ctxd says OpenCode
compacts is where it does.

For each config, the real `opencode run` (offline, against mock_openai_chat.py) takes a step
whose total (prompt + the answer's 40 tokens) is one token short of the point ctxd reads from
that config, then one that reaches it: OpenCode compacts after the second step only. Then
`ctxd replay` of the database it wrote, with the same opencode.json, reports that point and
the config's window.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from e2e_support import Mock, RunDir, run, write_json
from test_opencode_e2e import env, opencode_config

pytestmark = pytest.mark.e2e

OUTPUT = 40  # the mock's completion tokens per step


def usage(prompt: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": OUTPUT, "cached_tokens": 0}


def bash(i: int, prompt: int) -> dict[str, Any]:
    command = {"command": f"echo LIMIT-{i}", "description": f"step {i}"}
    return {"tool": {"name": "bash", "arguments": command}, "usage": usage(prompt)}


@pytest.mark.parametrize(
    ("limit", "extra", "point"),
    [
        ({"context": 200_000, "output": 8_000}, {}, 192_000),  # context - output
        ({"context": 200_000, "input": 100_000, "output": 32_000}, {}, 80_000),  # input - 20,000
        (
            {"context": 200_000, "input": 100_000, "output": 32_000},
            {"compaction": {"reserved": 30_000}},
            70_000,
        ),
    ],
)
def test_opencode_compacts_where_ctxd_reads_it_from_the_config(
    opencode_bin: Path, netns: bool, tmp_path: Path, limit: dict[str, int], extra: Any, point: int
) -> None:
    rd = RunDir.create(tmp_path)
    below, at = point - OUTPUT - 1, point - OUTPUT
    steps = [
        bash(0, below),
        bash(1, at),
        bash(2, 20_000),
        {"text": "Done.", "usage": usage(21_000)},
    ]
    mock = Mock("mock_openai_chat", rd.root, {"steps": steps, "step_mode": "counter"}, netns=netns)
    mock.start()
    config_home = rd.root / "xdg-config"
    try:
        stand_in = SimpleNamespace(env={"XDG_CONFIG_HOME": str(config_home)})
        path = opencode_config(rd, stand_in, mock)  # type: ignore[arg-type]
        doc = json.loads(path.read_text())
        doc["provider"]["mock"]["models"]["mock-model"]["limit"] = limit
        write_json(path, {**doc, **extra})
        argv = mock.wrap([str(opencode_bin), "run", "Run the steps"])
        res = run(argv, cwd=rd.work, env=env(rd, mock, stand_in.env), timeout=120)
        assert res.returncode == 0, res.describe()
    finally:
        mock.stop()
    database = rd.home / ".local" / "share" / "opencode" / "opencode.db"
    replay = subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", "--json", str(database)],
        env={"HOME": str(rd.home), "XDG_CONFIG_HOME": str(config_home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [json.loads(line) for line in replay.stdout.splitlines()]
    rows = [(r["tokens"], r["compaction"]) for r in lines if not r.get("final")]
    # OpenCode compacted after the step that reached the point, not after the one short of it
    # (the summary's answer is the mock's 5 tokens).
    assert rows == [(below, False), (at, False), (5, True), (20_000, False), (21_000, False)]
    final = lines[-1]
    assert (final["window"], final["window_source"], final["compaction_at"]) == (
        200_000,
        "config",
        point,
    )
