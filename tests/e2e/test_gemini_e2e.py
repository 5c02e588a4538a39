"""Gemini CLI, the real CLI, offline against mock_gemini.py in a loopback-only namespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_support import (
    Mock,
    RunDir,
    gemini_capture_hooks,
    gemini_env,
    gemini_prepare,
    gemini_tool_steps,
    last_turn_text_gemini,
    marks,
    run,
)

pytestmark = pytest.mark.e2e


def test_smoke_scripted_tool_calls_with_hooks(
    gemini_bin: Path, netns: bool, tmp_path: Path
) -> None:
    """Phase-1 smoke: a -p session of three shell calls completes, every hook fires, and an
    AfterTool hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    gemini_prepare(rd, gemini_capture_hooks())
    mock = Mock("mock_gemini", rd.root, {"steps": gemini_tool_steps(3)}, netns=netns).start()
    try:
        res = run(
            mock.wrap(
                [str(gemini_bin), "-p", "Run the steps", "--yolo", "--output-format", "json"]
            ),
            cwd=rd.work,
            env=gemini_env(rd, mock),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    assert json.loads(res.stdout)["response"].strip() == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("AfterTool") == 3, labels
    for ev in ("SessionStart", "BeforeAgent", "BeforeTool", "AfterAgent", "SessionEnd"):
        assert ev in labels, labels
    assert not mock.requests_of_kind("proxy"), "the CLI tried to reach an outside host"

    main = mock.main_requests()
    assert len(main) == 4
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_gemini)
        assert arrived == [i == n for i in range(4)], (n, arrived)
