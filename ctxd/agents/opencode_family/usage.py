"""One OpenCode step's usage: a `step-finish` part and the message it belongs to -> the update.

The same part and message are in the database (`store`, table `part` and `message`, JSON in
`data`) and in what `opencode export` prints (`export`), so both readers hand them here and get
the same figures. A step's `tokens {input, output, reasoning, cache {read, write}}` has `input`
as the uncached rest of the prompt: the context the next request carries is input + cache.read +
cache.write, and the step's output counts towards the compaction point (`pending`), as OpenCode
counts it. A compaction is an assistant message with `summary: true` (1.x writes `mode` and
`agent` "compaction" beside it; older versions wrote the mode of the agent that ran it): its
step's output is the summary, what the context holds after it until the next step reports (an
estimate).
"""

from __future__ import annotations

from typing import Any

from ctxd.core.events import UsageUpdate

__all__ = ["step_usage"]


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def step_usage(
    step: Any, message: Any, turn_id: str | None, at: float | None
) -> UsageUpdate | None:
    """The update a `step-finish` part states (None for any other part, or one whose figures
    are not counts). `turn_id` names the step (its part's id); `at` is when it finished."""
    if not isinstance(step, dict) or not isinstance(message, dict):
        return None
    tokens = step.get("tokens")
    if step.get("type") != "step-finish" or not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    assert isinstance(cache, dict)
    figures = [
        _count(tokens.get("input")),
        _count(cache.get("read", 0)),
        _count(cache.get("write", 0)),
    ]
    if any(n is None for n in figures):
        return None
    model = message.get("modelID") if isinstance(message.get("modelID"), str) else None
    output = _count(tokens.get("output")) or 0
    if message.get("summary") is True:
        return UsageUpdate(
            tokens=output, at=at, model=model, compaction=True, turn_id=turn_id, estimated=True
        )
    return UsageUpdate(
        tokens=sum(n for n in figures if n is not None),
        at=at,
        model=model,
        turn_id=turn_id,
        pending=output,
    )
