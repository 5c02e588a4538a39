"""Claude Code, the real CLI, offline against mock_anthropic.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import (
    Mock,
    RunDir,
    claude_capture_hooks,
    claude_env,
    claude_prepare,
    claude_tool_steps,
    last_turn_text_claude,
    marks,
    run,
)

pytestmark = pytest.mark.e2e


def test_smoke_scripted_tool_calls_with_hooks(claude_bin: Path, tmp_path: Path) -> None:
    """Phase-1 smoke: a -p session of three Bash tool calls completes, every hook fires, and a
    PostToolUse hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    claude_prepare(rd, {"hooks": claude_capture_hooks()})
    mock = Mock("mock_anthropic", rd.root, {"steps": claude_tool_steps(3)}).start()
    try:
        res = run(
            [
                str(claude_bin),
                "-p",
                "Run the steps",
                "--output-format",
                "json",
                "--dangerously-skip-permissions",
            ],
            cwd=rd.work,
            env=claude_env(rd, mock),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout)
    assert out["is_error"] is False and out["result"] == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("PostToolUse") == 3, labels
    for ev in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"):
        assert ev in labels, labels

    main = mock.main_requests()
    assert len(main) == 4  # one per tool call, plus the final answer
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_claude)
        assert arrived == [i == n for i in range(4)], (n, arrived)
