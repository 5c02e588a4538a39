"""Codex CLI, the real CLI, offline against mock_openai.py in a loopback-only namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
from e2e_support import (
    CODEX_FLAGS,
    Mock,
    RunDir,
    codex_capture_hooks,
    codex_env,
    codex_prepare,
    codex_tool_steps,
    last_turn_text_codex,
    marks,
    run,
)

pytestmark = pytest.mark.e2e


def test_smoke_scripted_tool_calls_with_hooks(codex_bin: Path, netns: bool, tmp_path: Path) -> None:
    """Phase-1 smoke: an exec session of three shell calls completes, every hook fires, and a
    PostToolUse hook's additionalContext reaches the model right after its own call."""
    rd = RunDir.create(tmp_path)
    mock = Mock("mock_openai", rd.root, {"steps": codex_tool_steps(3)}, netns=netns).start()
    try:
        codex_prepare(rd, mock, codex_capture_hooks())
        last = rd.root / "last_message.txt"
        res = run(
            mock.wrap([str(codex_bin), "exec", *CODEX_FLAGS, "-o", str(last), "Run the steps"]),
            cwd=rd.work,
            env=codex_env(rd),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    assert last.read_text().strip() == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("PostToolUse") == 3, labels
    for ev in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"):
        assert ev in labels, labels

    main = mock.main_requests()
    assert len(main) == 4
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_codex)
        assert arrived == [i == n for i in range(4)], (n, arrived)
