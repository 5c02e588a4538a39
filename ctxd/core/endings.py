"""Why a session ended, in words: the codes the agents' end hooks send (several agents share
them) and ctxd's own, as a person reads them; for `ctxd status` and the dashboard (the status
rows' `ended_why`). `ctxd status --json` keeps the code too."""

from __future__ import annotations

__all__ = ["ENDED_REASONS", "ended_words"]

#: The codes seen in session-end payloads and the daemon's own reasons, in words. A code not
#: here is shown as it is: new codes come with new agent versions.
ENDED_REASONS = {
    "prompt_input_exit": "the user quit",
    "exit": "the user quit",
    "user_exit": "the user quit",
    "logout": "the user logged out",
    "clear": "cleared with /clear",
    "resume": "another session resumed it",
    "bypass_permissions_disabled": "bypass-permissions mode was turned off",
    "complete": "the agent finished",
    "error": "an error stopped it",
    "abort": "aborted",
    "timeout": "timed out",
    "other": "reason not given",
    "session end": "reason not given",
    "idle": "no activity for [sessions] idle_minutes",
    "transcript deleted": "its transcript was deleted",
    "transcript replaced": "its transcript was replaced",
}


def ended_words(reason: object) -> str:
    """`reason` (a hook's code or the daemon's) in words; "reason not given" when none."""
    code = str(reason) if reason else "session end"
    return ENDED_REASONS.get(code, code)
