"""Status rows the dashboard's tests draw: a centre with an ended, a broken and a live session.

The broken one cannot have its figures computed (a state restored wrong), as the dashboard must
draw it: as an error, not as data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.daemon.centre import Centre

if TYPE_CHECKING:
    from conftest import World


@dataclass(frozen=True)
class Rows:
    centre: Centre
    ended: Any
    broken: Any
    live: Any


def ended_broken_and_live(world: World, monkeypatch: pytest.MonkeyPatch) -> Rows:
    """Three Claude Code sessions at 100,000 tokens: the user quit the first, the second's
    figures raise, the third is live."""
    centre = Centre.open(world.env, {"claude": world.claude_projects}, monotonic=lambda: 0.0)
    ended, broken, live = world.claude(), world.claude(), world.claude()
    for t in (ended, broken, live):
        t.assistant(100_000)
        centre.answers.handle_hook("claude", None, json.dumps(t.payload("PostToolUse")).encode())
    end = ended.payload("SessionEnd", reason="prompt_input_exit")
    centre.answers.handle_hook("claude", None, json.dumps(end).encode())
    grounds = centre.answers.grounds

    def failing_for_one(state: Any) -> Any:
        if state.key == str(broken.path):
            raise AttributeError("a state restored wrong")
        return grounds(state)

    monkeypatch.setattr(centre.answers, "grounds", failing_for_one)
    return Rows(centre, ended, broken, live)
