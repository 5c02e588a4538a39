"""OpenCode's own model limits (opencode.json), against the real CLI: where ctxd says OpenCode
compacts is where it does.

For each config, the real `opencode run` (offline, against mock_openai_chat.py) takes a step
whose total (prompt + the answer's 40 tokens) is one token short of the point ctxd reads from
that config, then one that reaches it: OpenCode compacts after the second step only. Then
`ctxd replay` of the database it wrote, with the same opencode.json, reports that point and
the config's window.

The last case runs OpenCode in a subfolder of a git repository whose config is spread over the
repository's root, the subfolder and their `.opencode/` directories, with a config above the
repository that must not count: the point is the one ctxd reads from the files OpenCode merges.
"""

from __future__ import annotations

import json
import shutil
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


def reserved(n: int) -> dict[str, Any]:
    return {"compaction": {"reserved": n}}


def bash(i: int, prompt: int) -> dict[str, Any]:
    command = {"command": f"echo LIMIT-{i}", "description": f"step {i}"}
    return {"tool": {"name": "bash", "arguments": command}, "usage": usage(prompt)}


def compact_at(
    opencode_bin: Path,
    netns: bool,
    rd: RunDir,
    point: int,
    limit: dict[str, int],
    extra: Any,
    cwd: str = ".",
) -> list[dict[str, Any]]:
    """Run the steps around `point` in the folder `cwd` of `rd`'s work dir, OpenCode's global
    config holding the mock with `limit` and `extra` laid over it; assert that OpenCode
    compacted after the step that reached `point`; return what `ctxd replay` says of the
    database it wrote."""
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
        res = run(argv, cwd=rd.work / cwd, env=env(rd, mock, stand_in.env), timeout=120)
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
    return lines


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
    lines = compact_at(opencode_bin, netns, RunDir.create(tmp_path), point, limit, extra)
    final = lines[-1]
    assert (final["window"], final["window_source"], final["compaction_at"]) == (
        200_000,
        "config",
        point,
    )


def test_opencode_in_a_subfolder_reads_the_repository_s_configs_as_ctxd_does(
    opencode_bin: Path, netns: bool, tmp_path: Path
) -> None:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    rd = RunDir.create(tmp_path)
    subprocess.run([git, "init", "-q", str(rd.work)], check=True, env={"HOME": str(rd.home)})
    # OpenCode checks each file on its own: a model's limit needs its context and output.
    limit = {"context": 200_000, "input": 100_000, "output": 8_000}
    model = {"provider": {"mock": {"models": {"mock-model": {"limit": limit}}}}}
    # Above the repository: read, it would stop OpenCode from compacting at all.
    write_json(tmp_path / "opencode.json", {"compaction": {"auto": False}})
    write_json(rd.work / "opencode.json", model)  # the repository's root: over the global one
    write_json(rd.work / "sub" / "opencode.json", reserved(40_000))
    # The `.opencode/`s outrank the project files, and the root's outranks the subfolder's.
    write_json(rd.work / "sub" / "deeper" / ".opencode" / "opencode.json", reserved(30_000))
    write_json(rd.work / ".opencode" / "opencode.json", reserved(25_000))
    point = 100_000 - 25_000  # the root's input limit less the root `.opencode/`'s reserve
    lines = compact_at(
        opencode_bin,
        netns,
        rd,
        point,
        {"context": 400_000, "output": 32_000},
        {},
        cwd="sub/deeper",
    )
    final = lines[-1]
    assert (final["window"], final["window_source"], final["compaction_at"]) == (
        200_000,
        "config",
        point,
    )
