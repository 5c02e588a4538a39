"""Adding and removing ctxd's entries in a Claude-style `hooks` map, as pure functions.

Claude Code, Gemini CLI, Codex CLI and Qwen Code share one shape:
`{"hooks": {Event: [{"matcher"?: str, "hooks": [{"type": "command", "command": ..., ...}]}]}}`.
These functions take a parsed settings document and return a new one; they never mutate their
input and never touch an entry whose command is not ctxd's. `specs_for` builds the hooks ctxd
wants (command hooks, or HTTP hooks where an agent posts them); `hook_urls` finds ctxd's HTTP
hooks' URLs in a document.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxd.errors import SettingsFileError

__all__ = ["HookSpec", "Json", "add_hooks", "hook_urls", "positions", "remove_hooks", "specs_for"]

Json = dict[str, Any]


@dataclass(frozen=True)
class HookSpec:
    """One hook ctxd wants: the event, the group's matcher (None: no matcher key), the handler."""

    event: str
    matcher: str | None
    handler: Mapping[str, Any]


def specs_for(
    events: Iterable[tuple[str, str | None]],
    command: Mapping[str, Any],
    http: Mapping[str, Any] | None = None,
) -> tuple[HookSpec, ...]:
    """One hook per (event, matcher): the `command` handler, or with `http` that handler for
    every event but SessionStart, whose command hook starts the daemon when it is down."""
    return tuple(
        HookSpec(event, matcher, command if http is None or event == "SessionStart" else http)
        for event, matcher in events
    )


def hook_urls(doc: Mapping[str, Any], is_ctxd: Callable[[object], bool]) -> list[str]:
    """The URLs of the HTTP hooks in `doc` that `is_ctxd` claims, each once, in their order."""
    found: list[str] = []
    hooks = doc.get("hooks")
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for handler in _handlers(group) or ():
                url = handler.get("url") if isinstance(handler, dict) else None
                if isinstance(url, str) and is_ctxd(url) and url not in found:
                    found.append(url)
    return found


def _check_shape(doc: Json) -> None:
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise SettingsFileError(f'"hooks" is a {type(hooks).__name__}, not an object')


def _handlers(group: object) -> list[Any] | None:
    """The handler list of a well-formed group, else None (foreign oddities are left alone)."""
    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
        return group["hooks"]  # type: ignore[no-any-return]
    return None


def _is_ours(handler: object, is_ctxd: Callable[[object], bool]) -> bool:
    # A command hook by its command, an HTTP hook by its URL.
    return isinstance(handler, dict) and (
        is_ctxd(handler.get("command")) or is_ctxd(handler.get("url"))
    )


def add_hooks(doc: Json, specs: tuple[HookSpec, ...], is_ctxd: Callable[[object], bool]) -> Json:
    """`doc` with exactly one ctxd handler per spec, everything else as it was.

    An existing ctxd handler for the event is updated where it stands (so positions, which Codex
    keys its trust on, stay put) and duplicates are dropped; otherwise a new group is appended
    after the user's own. ctxd handlers on events no spec names (left by an older ctxd) go.
    Raises `SettingsFileError` when `hooks` is not the shape the agent itself would accept.
    """
    _check_shape(doc)
    out = copy.deepcopy(doc)
    wanted = {spec.event: spec for spec in specs}
    if len(wanted) != len(specs):
        raise ValueError("one spec per event")
    if out.get("hooks") is None:
        out["hooks"] = {}
    hooks: Json = out["hooks"]
    for event in list(hooks):
        if event not in wanted:
            _strip_event(hooks, event, is_ctxd)
    for event, spec in wanted.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise SettingsFileError(f'"hooks.{event}" is a {type(groups).__name__}, not a list')
        hooks[event] = _place(groups, spec, is_ctxd)
    return out


def _place(groups: list[Any], spec: HookSpec, is_ctxd: Callable[[object], bool]) -> list[Any]:
    """The event's groups with ctxd's handler placed once (see `add_hooks`)."""
    wanted_handler = dict(spec.handler)
    result: list[Any] = []
    placed = False
    for group in groups:
        handlers = _handlers(group)
        if handlers is None or not any(_is_ours(h, is_ctxd) for h in handlers):
            result.append(group)
            continue
        only_ours = all(_is_ours(h, is_ctxd) for h in handlers)
        kept: list[Any] = []
        for handler in handlers:
            if not _is_ours(handler, is_ctxd):
                kept.append(handler)
            elif not placed and (only_ours or _matcher(group) == spec.matcher):
                kept.append(wanted_handler)
                placed = True
        if not kept:
            continue  # a group that held only (duplicate) ctxd handlers
        new_group = dict(group)
        new_group["hooks"] = kept
        if only_ours:
            # A group made of ctxd handlers only is ctxd's: its matcher follows the spec.
            _set_matcher(new_group, spec.matcher)
        result.append(new_group)
    if not placed:
        result.append(_new_group(spec))
    return result


def _matcher(group: Mapping[str, Any]) -> str | None:
    matcher = group.get("matcher")
    return matcher if isinstance(matcher, str) else None


def _set_matcher(group: Json, matcher: str | None) -> None:
    if matcher is None:
        group.pop("matcher", None)
    else:
        group["matcher"] = matcher


def _new_group(spec: HookSpec) -> Json:
    group: Json = {}
    if spec.matcher is not None:
        group["matcher"] = spec.matcher
    group["hooks"] = [dict(spec.handler)]
    return group


def _strip_event(hooks: Json, event: str, is_ctxd: Callable[[object], bool]) -> None:
    groups = hooks[event]
    if not isinstance(groups, list):
        return  # not an event (e.g. an old Gemini CLI's `hooks.enabled`): not ours to judge
    removed = False
    kept_groups: list[Any] = []
    for group in groups:
        handlers = _handlers(group)
        if handlers is None or not any(_is_ours(h, is_ctxd) for h in handlers):
            kept_groups.append(group)
            continue
        removed = True
        kept = [h for h in handlers if not _is_ours(h, is_ctxd)]
        if kept:
            new_group = dict(group)
            new_group["hooks"] = kept
            kept_groups.append(new_group)
    if removed and not kept_groups:
        del hooks[event]
    else:
        hooks[event] = kept_groups


def remove_hooks(doc: Json, is_ctxd: Callable[[object], bool]) -> Json:
    """`doc` without any ctxd handler; groups, events and `hooks` that ctxd emptied are dropped.

    Containers that were already empty stay: only what removing ctxd's handlers emptied goes, so
    that install followed by uninstall gives back the original document.
    """
    _check_shape(doc)
    out = copy.deepcopy(doc)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    had_events = bool(hooks)
    for event in list(hooks):
        _strip_event(hooks, event, is_ctxd)
    if had_events and not hooks:
        del out["hooks"]
    return out


def positions(doc: Json, is_ctxd: Callable[[object], bool]) -> list[tuple[str, int, int]]:
    """Where ctxd's handlers are: (event, group index, handler index), in document order."""
    found: list[tuple[str, int, int]] = []
    hooks = doc.get("hooks")
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            for handler_index, handler in enumerate(_handlers(group) or ()):
                if _is_ours(handler, is_ctxd):
                    found.append((event, group_index, handler_index))
    return found
