"""Built-in model tables: a row per model family, with its window, its maximum output and where
those figures come from. Each agent package keeps its own rows (`<agent>/models.py`); this module
holds the row type and the lookup they share.

A table is a fallback: the window resolution ranks the agent's own report, a size in the model id
and what was learned above it (`ctxd.core.window.resolve_window`), so rows favour documented or
measured figures and leave a model out rather than invent a number.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["ModelInfo", "lookup", "normalise_model_id", "sizes_of", "windows"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One row: a normalised model-id prefix, the window the agent runs it with, its maximum
    output, and the source of those figures; `sizes`, the other windows the model's owner
    states it with (an earlier release's, the most its catalog allows), which a session that
    holds more than `window` proves it ran with."""

    prefix: str
    window: int
    max_output: int
    source: str
    sizes: tuple[int, ...] = ()


_BRACKET_SUFFIX = re.compile(r"\[[^\]]*\]\s*$")
# Bedrock ids and inference profiles: "us.anthropic.claude-…", "global.anthropic.claude-…".
_VENDOR_PREFIX = re.compile(r"^(?:[a-z]{2,6}\.)?[a-z]+\.(?=[a-z]+-)")


@functools.lru_cache(maxsize=4096)  # pure, and asked on every hook for the same few ids
def normalise_model_id(model: str) -> str:
    """The id tables are keyed by: lower-case, blanks, a trailing "[...]" and any provider path
    ("models/", "openai/") or vendor prefix ("us.anthropic.") removed.

    "Claude-Opus-4-8[1m]" -> "claude-opus-4-8"; "models/gemini-2.5-pro" -> "gemini-2.5-pro".
    Date and version suffixes are kept: prefix matching makes them harmless.
    """
    key = _BRACKET_SUFFIX.sub("", model.strip()).strip().lower()
    key = key.rsplit("/", 1)[-1]
    return _VENDOR_PREFIX.sub("", key)


def _extends(model_id: str, prefix: str) -> bool:
    # A prefix matches the id itself or the id followed by a separator ("-20250929", "@2025…",
    # ".5", ":0"); it never splits a word or a number ("gpt-5" does not match "gpt-55").
    if not model_id.startswith(prefix):
        return False
    rest = model_id[len(prefix) :]
    return not rest or not rest[0].isalnum()


def lookup(model: str | None, rows: Iterable[ModelInfo]) -> ModelInfo | None:
    """The row whose prefix is the longest one matching the normalised `model`, else None.

    "claude-haiku-4-5-20251001" -> the "claude-haiku-4-5" row; "claude-sonnet-5-5" -> its own
    row, not "claude-sonnet-5"'s; an empty or unknown id -> None.
    """
    if not model:
        return None
    return _lookup(model, rows if isinstance(rows, tuple) else tuple(rows))


@functools.lru_cache(maxsize=4096)  # the tables are constant tuples; each hook asks again
def _lookup(model: str, rows: tuple[ModelInfo, ...]) -> ModelInfo | None:
    key = normalise_model_id(model)
    if not key:
        return None
    best: ModelInfo | None = None
    for info in rows:
        if _extends(key, info.prefix) and (best is None or len(info.prefix) > len(best.prefix)):
            best = info
    return best


def sizes_of(rows: tuple[ModelInfo, ...]) -> Callable[[str | None], tuple[int, ...]]:
    """`AgentSpec.window_sizes` for a table: model -> its row's window and other sizes."""

    def sizes(model: str | None) -> tuple[int, ...]:
        info = lookup(model, rows)
        return () if info is None or not info.sizes else (info.window, *info.sizes)

    return sizes


def windows(rows: Iterable[ModelInfo]) -> dict[str, int]:
    """A table's windows as `AgentSpec.windows` wants them: prefix -> window."""
    return {info.prefix: info.window for info in rows}
