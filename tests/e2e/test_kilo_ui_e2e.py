"""Kilo CLI's interactive UI under tmux, with ctxd's plugin and a real daemon: the handoff that
`kilo run` cuts off (it disposes its instance as soon as the session is idle) is sent as the
user's next message once, and answered, in the UI (as OpenCode's, test_opencode_e2e.py)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from e2e_support import Tmux, wait_for
from test_kilo_e2e import Rig, env, rig, start
from test_opencode_e2e import bash_steps, handoffs

__all__ = ["rig"]

pytestmark = pytest.mark.e2e


def test_the_ui_asks_the_handoff_once_and_answers_it(rig: Rig, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    # a call, then the answer at 74 % of the room used; then "Noted." for the handoff turn
    steps = bash_steps([50_000, 120_000, 124_000])
    steps.append({"text": "Noted.", "usage": {"prompt_tokens": 125_000, "completion_tokens": 40}})
    start(rig, steps)
    rig.ctxd.start(rig.mock.wrap)
    words = " ".join(
        shlex.quote(f"{k}={v}") for k, v in env(rig.rd, rig.mock, rig.ctxd.env).items()
    )
    argv = shlex.join(rig.mock.wrap([str(rig.bin), "--prompt", "Run the steps"]))
    tmux = Tmux(tmp_path / "tmux.sock", "kilo")
    work = shlex.quote(str(rig.rd.work))
    tmux.start(f"cd {work} && env -i {words} {argv}; sleep 30")
    try:
        assert wait_for(lambda: len(rig.main()) >= 4, 90), tmux.pane()
        assert handoffs(rig.main()) == [3], tmux.pane()
        assert wait_for(lambda: "Noted." in tmux.pane(), 20), tmux.pane()
        assert not wait_for(lambda: len(rig.main()) > 4, 5), "a second handoff turn"
    finally:
        tmux.kill()
    [row] = rig.rows()
    assert row["handoff_asked"] is True and row["tokens"] == 125_000
