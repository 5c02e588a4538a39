"""Which context window applies to a session, and which source said so.

Pure functions: the caller gathers every candidate (statusline payload, transcript report, model
id, what was learned earlier, the configured table) and `resolve_window` picks one by a fixed
precedence, so a wrong 200K fallback can never shadow a better source again (graceful-handoff
fired 5-7x too early on 1M models for exactly that reason).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ctxd.errors import InvalidInput

WindowSource = Literal[
    "option",
    "statusline",
    "agent",
    "config",
    "model-id",
    "learned",
    "compaction",
    "table",
    "usage",
    "default",
]

#: Windows real models ship with, smallest first. When usage outgrows the assumed window the
#: true window is almost certainly the next one of these, not `tokens` itself.
COMMON_WINDOWS: tuple[int, ...] = (200_000, 272_000, 400_000, 1_000_000, 1_048_576, 2_000_000)

#: The window assumed when no source says anything: the largest common one, so that an unknown
#: model's percentages err low rather than warn early.
DEFAULT_WINDOW = 1_000_000

__all__ = [
    "COMMON_WINDOWS",
    "DEFAULT_WINDOW",
    "Window",
    "WindowSource",
    "infer_window",
    "lookup_table",
    "model_key",
    "resolve_window",
    "window_for_usage",
    "window_from_model_id",
]

# Claude Code's statusline names 1M sessions "claude-opus-4-6[1m]"; accept any "[<n>k]"/"[<n>m]"
# at the end, with an optional fraction ("[1.5m]").
_SIZE_SUFFIX = re.compile(r"\[\s*(\d+(?:\.\d+)?)\s*([km])\s*\]\s*$", re.IGNORECASE)
_ANY_SUFFIX = re.compile(r"\[[^\]]*\]\s*$")
_UNIT = {"k": 1_000, "m": 1_000_000}


@dataclass(frozen=True, slots=True)
class Window:
    """A window size in tokens (always > 0) and the source it came from."""

    size: int
    source: WindowSource


def window_from_model_id(model: str | None) -> int | None:
    """The window a model id states in a trailing bracket, else None.

    "claude-opus-4-6[1m]" -> 1_000_000, "x[200k]" -> 200_000 (decimal units, as the agents
    mean them); no suffix, an unreadable one or a zero size -> None.
    """
    if not model:
        return None
    m = _SIZE_SUFFIX.search(model)
    if m is None:
        return None
    size = int(float(m.group(1)) * _UNIT[m.group(2).lower()])
    return size if size > 0 else None


@functools.lru_cache(maxsize=4096)  # pure; every hook asks for the same few models
def model_key(model: str) -> str:
    """The key under which a window learned for `model` is remembered and looked up.

    Lower-cased, surrounding blanks and any trailing "[...]" suffix removed:
    "Claude-Opus-4-6[1m]" and "claude-opus-4-6" share the key "claude-opus-4-6". The suffix is
    stripped because only the statusline's id carries it; transcripts and hook payloads name the
    bare model, and a window learned from the statusline must be found again from those. The
    price: a user switching between the 200K and 1M variant of one model gets the most recently
    reported window until the next authoritative report (the statusline or a suffixed id, both
    of which outrank a learned window).
    """
    return _ANY_SUFFIX.sub("", model.strip()).strip().lower()


def _positive(value: int | None) -> int | None:
    return value if value is not None and value > 0 else None


def lookup_table(model: str | None, table: Mapping[str, int]) -> int | None:
    """The table's window for `model`: exact key first, then the longest key that is a prefix.

    Keys and model are compared by `model_key`, so "claude-sonnet-4-5" matches
    "claude-sonnet-4-5-20250929". Entries <= 0 are ignored. Every hook asks this, so the table
    is indexed once and each model's answer remembered (see `_TableIndex`).
    """
    if not model:
        return None
    return _index_of(table).window_for(model_key(model))


@dataclass(slots=True)
class _TableIndex:
    """A table's keys normalised once, longest prefix first, and the answers given so far: a
    lookup is a dict hit instead of a scan of the table (a large user table made every hook
    scan thousands of keys)."""

    exact: dict[str, int]
    prefixes: list[tuple[str, int]]
    answers: dict[str, int | None] = field(default_factory=dict)

    def window_for(self, key: str) -> int | None:
        if key in self.answers:
            return self.answers[key]
        found = self.exact.get(key)
        if found is None:
            found = next((size for k, size in self.prefixes if key.startswith(k)), None)
        if len(self.answers) >= _MAX_ANSWERS:
            self.answers.clear()
        self.answers[key] = found
        return found


_MAX_ANSWERS = 4096
# Tables by identity, each kept with the index built from it (the strong reference keeps the id
# from being reused). Settings are replaced only when the config changes: a few entries at most.
_INDEXES: dict[int, tuple[Mapping[str, int], _TableIndex]] = {}


def _index_of(table: Mapping[str, int]) -> _TableIndex:
    cached = _INDEXES.get(id(table))
    if cached is not None and cached[0] is table:
        return cached[1]
    exact: dict[str, int] = {}
    for raw_key, size in table.items():
        k = model_key(raw_key)
        if k and size > 0 and k not in exact:
            exact[k] = size
    index = _TableIndex(exact, sorted(exact.items(), key=lambda item: -len(item[0])))
    if len(_INDEXES) >= 8:
        _INDEXES.clear()
    _INDEXES[id(table)] = (table, index)
    return index


def window_for_usage(tokens: int, sizes: Sequence[int] = ()) -> int:
    """The smallest window that holds `tokens`: of `sizes` (the windows the model's owner
    states it with) where one does, else of the common ones, else `tokens` itself.

    A model that comes in 272,000 and 372,000 and held 371,566 ran with 372,000, not with the
    400,000 of some other model.
    """
    for size in sorted(s for s in sizes if s > 0):
        if size >= tokens:
            return size
    for size in COMMON_WINDOWS:
        if size >= tokens:
            return size
    return tokens


def infer_window(
    compacted_at: int, point_for: Callable[[int], int | None], lead: float = 0.0
) -> int | None:
    """The window an automatic compaction at `compacted_at` tokens points to, else None.

    An agent compacts on the first request whose count reaches its point, so the count it
    compacted at lies at or just above the point of its real window (its record may state a
    few tokens less than the count it compared: `INFER_SLACK`). Of the common windows that
    hold `compacted_at` and whose point (`point_for(window)`, the agent's rule) it reached, the
    one whose point lies closest below it is taken: 170,251 -> 200,000 under Claude Code's rule
    (point 167,000), 490,000 -> 1,000,000 when a 50 % override put the point there. When two
    windows explain it equally (a compaction capped below both, so the point does not depend on
    the window), it says nothing about the window: None. An agent that compacts on its estimate
    of the next request (the last figure plus what was appended since: a tool's output, the
    user's next words) may compact below its point: by up to `lead` of it (a fraction).
    """
    best: tuple[int, int] | None = None  # (distance above the point, window)
    tied = False
    for size in COMMON_WINDOWS:
        if size < compacted_at:
            continue
        point = point_for(size)
        if point is None or point - int(point * lead) > compacted_at + INFER_SLACK:
            continue
        gap = abs(compacted_at - point)
        if best is not None and gap == best[0]:
            tied = True
        elif best is None or gap < best[0]:
            best, tied = (gap, size), False
    return None if best is None or tied else best[1]


#: How far below an agent's point the size its compaction record states may lie: Claude Code
#: compares its count plus a few tokens it estimates for what was appended since the last
#: response, and records the count without them (a point of 367,000 reached at 366,998 + 2,
#: recorded as 366,999).
INFER_SLACK = 100


def resolve_window(
    *,
    statusline: int | None,
    agent_reported: int | None,
    model: str | None,
    learned: Mapping[str, int],
    table: Mapping[str, int],
    tokens: int,
    default: int = DEFAULT_WINDOW,
    inferred: Callable[[], int | None] | None = None,
    configured: int | None = None,
    proved: int = 0,
    sizes: Sequence[int] = (),
    catalog: int | None = None,
) -> Window:
    """Pick the window by precedence; the first usable source wins.

    1. `statusline`: the statusline's context_window_size (authoritative);
    2. `agent_reported`: the agent's own report in its transcript (Codex model_context_window);
    2b. `configured`: the window the agent's own configuration gives the model (OpenCode's
       `limit.context`), source "config";
    2c. `catalog`: the window the agent's own model catalog gives the model the session runs
       (pi's `contextWindow` for the answer's provider and model), source "agent": the figure
       the agent itself counts against, not ctxd's guess, and more exact than a window learned
       for the model's name from other sessions (other providers, other agents); but no report
       of this session's, so what the session holds raises it as in 6;
    3. a size in the model id ("[1m]");
    4. `learned[model_key(model)]`: learned earlier from an authoritative report;
    4b. `inferred()`: a window read from an observed automatic compaction (`infer_window`),
       source "compaction" (called only when the sources above say nothing);
    5. `table`: exact id, then longest prefix (see `lookup_table`);
    6. when `tokens`, or `proved` (the most this model is known to have held: a window a
       session proved by its own usage, kept across its compactions and learned for the model),
       exceed the window 2c, 4b, 5 or 7 gave: the smallest window that holds them, of
       `sizes` (the windows the model's owner states it with) first, then of the common ones
       (`window_for_usage`), source "usage";
    7. `default`.

    Sources that are None or <= 0 are skipped. Usage only ever raises a catalog's, a
    compaction's, a table's or the default window: the other sources are reports about this
    very session's model and are kept even when usage exceeds them. Raises InvalidInput when
    `default` <= 0.
    """
    if default <= 0:
        raise InvalidInput(f"default window must be positive, got {default}")
    if (size := _positive(statusline)) is not None:
        return Window(size, "statusline")
    if (size := _positive(agent_reported)) is not None:
        return Window(size, "agent")
    if (size := _positive(configured)) is not None:
        return Window(size, "config")
    if (size := _positive(catalog)) is not None:
        assumed = Window(size, "agent")
    elif (size := window_from_model_id(model)) is not None:
        return Window(size, "model-id")
    elif model and (size := _positive(learned.get(model_key(model)))) is not None:
        return Window(size, "learned")
    elif inferred is not None and (size := _positive(inferred())) is not None:
        assumed = Window(size, "compaction")
    elif (size := lookup_table(model, table)) is not None:
        assumed = Window(size, "table")
    else:
        assumed = Window(default, "default")
    held = max(tokens, proved)
    if held > assumed.size:
        return Window(window_for_usage(held, sizes), "usage")
    return assumed
