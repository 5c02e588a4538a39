"""The agent registry: the one place that lists the agents ctxd serves.

Everything outside `ctxd.agents` sees an agent only through its `AgentSpec` (`spec(name)`), and
the helpers here that ask every spec in turn. To add an agent, write a package that builds an
`AgentSpec` (see `ctxd.agents.spec` and docs/architecture.md) and add it to `_PACKAGES`.

A spec is imported when it is first asked for: a command about one agent (`ctxd handoff
--agent gemini`) loads that agent's package alone, and the helpers that ask every agent load
them all.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path

from ctxd.agents.hooks import goes_as_block, parse_hook, render_reply
from ctxd.agents.lines import decode, leading_members
from ctxd.agents.spec import AgentSpec
from ctxd.core.events import HookEvent, Reply
from ctxd.errors import InvalidInput

__all__ = [
    "AGENTS",
    "AgentSpec",
    "blocks",
    "builtin_windows",
    "detect_agent",
    "detect_agent_from_path",
    "has_format",
    "parse",
    "render",
    "spec",
    "store_owner",
    "store_paths",
    "transcript_owner",
    "transcript_roots",
    "window_sizes",
]

#: Each agent's name -> the package whose `SPEC` it is, in the order ctxd lists them.
_PACKAGES: Mapping[str, str] = {
    name: f"ctxd.agents.{name}"
    for name in (
        "claude",
        "gemini",
        "codex",
        "qwen",
        "opencode",
        "pi",
        "copilot",
        "cline",
        "kilo",
        "kimi",
    )
}

#: The agents' names, in the order ctxd lists them.
AGENTS: tuple[str, ...] = tuple(_PACKAGES)

#: The specs imported so far, by name.
_loaded: dict[str, AgentSpec] = {}

#: How many lines of a transcript's head are looked at before giving up.
_HEAD_LINES = 8


def spec(name: str) -> AgentSpec:
    """The agent called `name`; InvalidInput naming the known ones otherwise."""
    found = _loaded.get(name)
    if found is None:
        package = _PACKAGES.get(name)
        if package is None:
            # The name comes from a request: a refusal that echoed all of a huge one would
            # flood the log and the answer.
            shown = (
                repr(name) if len(name) <= 64 else f"{name[:64]!r}... ({len(name):,} characters)"
            )
            raise InvalidInput(f"unknown agent {shown}; expected one of {', '.join(AGENTS)}")
        loaded: AgentSpec = importlib.import_module(package).SPEC
        found = _loaded[name] = loaded
    return found


def _specs() -> tuple[AgentSpec, ...]:
    """Every agent's spec, in the order ctxd lists them."""
    return tuple(spec(name) for name in AGENTS)


def _detection() -> tuple[AgentSpec, ...]:
    """The order a transcript's head is matched in: newest agent first, since a later agent
    may write records an earlier one's check also accepts (Qwen Code's carry every key Claude
    Code's check looks for, and more)."""
    return _specs()[::-1]


def parse(agent: str, payload: bytes, event_hint: str | None = None) -> HookEvent:
    """A hook payload of `agent` as a `HookEvent` (InvalidInput with a one-line reason)."""
    return parse_hook(agent, spec(agent).dialect, payload, event_hint)


def blocks(event: HookEvent, reply: Reply) -> bool:
    """Whether `render(event, reply)` is a block (see `hooks.goes_as_block`)."""
    return goes_as_block(spec(event.agent).dialect, event, reply)


def render(event: HookEvent, reply: Reply) -> bytes:
    """The exact bytes `event`'s agent accepts as the hook's answer, or b"" when nothing is due."""
    return render_reply(spec(event.agent).dialect, event, reply)


def transcript_roots(env: Mapping[str, str]) -> dict[str, Path]:
    """Each agent's transcript root, watched recursively by the daemon."""
    return {s.name: s.files.transcript_root(env) for s in _specs()}


def store_paths(env: Mapping[str, str]) -> dict[str, Path]:
    """Each database that holds an agent's sessions (agents with a `store`), by agent."""
    return {s.name: s.store.path(env) for s in _specs() if s.store is not None}


def store_owner(path: str) -> str | None:
    """The agent whose session database the file at `path` is (any path), else None; asked
    newest agent first, as transcripts are (a fork's database has its parent's tables, and more)."""
    for s in _detection():
        if s.store is not None and s.store.recognises(path):
            return s.name
    return None


def transcript_owner(path: str, roots: Mapping[str, Path]) -> str | None:
    """The agent whose transcript `path` is, by the root it lies under and its name."""
    for name, root in roots.items():
        if path.startswith(f"{root}/") and spec(name).files.is_transcript(path):
            return name
    return None


def detect_agent_from_path(path: str) -> str | None:
    """The agent whose transcript layout `path` has, else None. Looks at the path only."""
    for s in _specs():
        if s.files.has_layout(path):
            return s.name
    return None


def detect_agent(head: bytes) -> str | None:
    """The agent whose line format the first bytes of a transcript have, else None.

    `head` may end in the middle of a line; complete lines are judged first, and a first line
    too long to be complete in `head` is judged by the keys it starts with. A head that is the
    start of one object spread over lines (an indented JSON document, not JSON lines) is judged
    by the members it holds whole, and a head none of that tells by how it starts (a line an
    agent writes before its document).
    """
    return _detect(_detection(), head)


def has_format(agent: str, head: bytes) -> bool:
    """Whether the first bytes of a transcript have `agent`'s line format, judged as
    `detect_agent` judges them but by that agent alone (whose package alone is imported)."""
    return _detect((spec(agent),), head) == agent


def _detect(specs: tuple[AgentSpec, ...], head: bytes) -> str | None:
    lines = head.split(b"\n")
    complete, partial = lines[:-1], lines[-1]
    for line in (*complete[:_HEAD_LINES], partial):
        record = decode(line)
        if record is not None:
            for s in specs:
                if s.files.recognises(record):
                    return s.name
    if not complete and (found := _by_prefix(specs, partial)) is not None:
        return found
    members = leading_members(head)
    if members:
        for s in specs:
            if s.files.recognises(members):
                return s.name
    # A line an agent writes before its document: the head is judged by how it starts.
    return _by_prefix(specs, head) if complete else None


def _by_prefix(specs: tuple[AgentSpec, ...], head: bytes) -> str | None:
    return next((s.name for s in specs if s.files.recognises_prefix(head)), None)


def builtin_windows() -> dict[str, int]:
    """Every agent's built-in model table (model id prefix -> window)."""
    table: dict[str, int] = {}
    for s in _specs():
        table.update(s.windows)
    return table


@functools.cache  # one function per agent, asked on every judgement
def window_sizes(name: str) -> Callable[[str | None], tuple[int, ...]]:
    """Model -> the windows its owner states it with (`AgentSpec.window_sizes`): the agent's
    own table first, else any other agent's (gpt-5.6 run by OpenCode or Copilot CLI comes in
    the sizes pi's and Codex's tables know)."""
    own = spec(name).window_sizes
    others = tuple(s.window_sizes for s in _specs() if s.name != name)

    def sizes(model: str | None) -> tuple[int, ...]:
        return own(model) or next((found for ask in others if (found := ask(model))), ())

    return sizes
