"""Why a session ended, in words: the reason codes the agents' session-end hooks send (and the
daemon's own) as a person would say them, for the dashboard and the status rows."""

from __future__ import annotations

__all__ = ["ended_words"]

#: The codes seen in session-end payloads and the daemon's own reasons, in words. A code not
#: here is shown with its underscores as spaces: new codes appear with new agent versions.
_WORDS = {
    "prompt_input_exit": "the user exited the agent",
    "exit": "the user exited the agent",
    "logout": "the user logged out",
    "clear": "the user cleared the conversation",
    "other": "the agent ended it",
    "session end": "the agent ended it",
    "bypass_permissions_disabled": "bypass-permissions mode was turned off",
    "idle": "no activity for too long",
    "transcript deleted": "its transcript was deleted",
    "transcript replaced": "its transcript was replaced by a new one",
}


def ended_words(reason: str | None) -> str:
    """`reason` (a hook's code or the daemon's) in words; "ended" when there is none."""
    if not reason:
        return "ended"
    known = _WORDS.get(reason.strip().lower())
    return known if known is not None else reason.replace("_", " ").strip()
