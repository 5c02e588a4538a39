"""Claude Code: ctxd's hooks and statusLine in `settings.json`, as pure transformations."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.claude.compaction import CONFIG_ENV, parse_version
from ctxd.agents.hookcmd import (
    is_ctxd_command,
    replacing_command,
    unwrap_command,
    user_statusline,
    wrap_command,
)
from ctxd.agents.hookmap import HookSpec, Json, add_hooks, remove_hooks, specs_for

AGENT = "claude"
#: Seconds (Claude Code's unit). The client gives up after about 2 s; this is only a ceiling.
TIMEOUT = 10
#: PostToolUseFailure: a tool call that fails as it runs fires it instead of PostToolUse.
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("PostToolUse", "*"),
    ("PostToolUseFailure", "*"),
    ("Stop", None),
    ("SubagentStop", None),
    ("PreCompact", None),
    ("PostCompact", None),
    ("SessionEnd", None),
    ("PreModelSwitch", None),
    ("PostModelSwitch", None),
    # 2.1.335+: a turn stopped without Stop (the user pressed Esc, a permission was denied).
    ("Interrupt", None),
)
#: Events only a release from the version named knows. An event an older release does not know
#: in settings.json stops its interactive UI at a "Settings Warning" dialog (seen with 2.1.332),
#: so such an event is registered only when the installed release is known to take it. The
#: plugin's hooks.json lists them all: a release ignores a plugin's unknown event quietly.
EVENTS_SINCE: dict[str, tuple[int, ...]] = {"Interrupt": (2, 1, 335)}

#: The environment the daemon reads for Claude Code (the spec's `config_env`).
HTTP_ENV = (*CONFIG_ENV, "CLAUDE_CONFIG_DIR")

__all__ = [
    "EVENTS",
    "EVENTS_SINCE",
    "HTTP_ENV",
    "enabled_plugin",
    "events_for",
    "hook_specs",
    "http_handler",
    "install",
    "settings_path",
    "uninstall",
]


def settings_path(env: Mapping[str, str]) -> Path:
    """`$CLAUDE_CONFIG_DIR/settings.json`, else `~/.claude/settings.json`."""
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        return Path(config_dir) / "settings.json"
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".claude" / "settings.json"


def events_for(version: str | None) -> tuple[tuple[str, str | None], ...]:
    """The events ctxd registers with Claude Code `version` ("2.1.337"): those that release
    knows; with the version unknown, only those every release knows."""
    known = parse_version(version)
    return tuple(
        (event, matcher)
        for event, matcher in EVENTS
        if event not in EVENTS_SINCE or (known is not None and known >= EVENTS_SINCE[event])
    )


def hook_specs(
    command: str, http_url: str | None = None, version: str | None = None
) -> tuple[HookSpec, ...]:
    """One hook per event ctxd needs (of those Claude Code `version` knows): a command, or with
    `http_url` an HTTP hook posting to the daemon for every event but SessionStart (Claude Code
    runs no HTTP hook there, and its command starts the daemon when it is down)."""
    handler = {"type": "command", "command": command, "timeout": TIMEOUT}
    events = events_for(version)
    return specs_for(events, handler, None if http_url is None else http_handler(http_url))


def http_handler(url: str) -> dict[str, object]:
    """An HTTP hook: the payload posted to `url`; the variables Claude Code's compaction rule
    reads go along as headers (what the command client passes in its request's "env")."""
    return {
        "type": "http",
        "url": url,
        "timeout": TIMEOUT,
        "headers": {f"X-Ctxd-Env-{name}": f"${{{name}}}" for name in HTTP_ENV},
        "allowedEnvVars": list(HTTP_ENV),
    }


def _describe(statusline: object) -> str:
    if isinstance(statusline, dict) and isinstance(statusline.get("command"), str):
        return f"`{statusline['command']}`"
    return repr(statusline)


def enabled_plugin(doc: Json) -> str | None:
    """The key of ctxd's plugin in `enabledPlugins` ("ctxd@<marketplace>") when it is enabled."""
    plugins = doc.get("enabledPlugins")
    if not isinstance(plugins, dict):
        return None
    return next(
        (key for key, on in plugins.items() if key.split("@", 1)[0] == "ctxd" and on),
        None,
    )


def install(
    doc: Json,
    command: str,
    statusline_command: str,
    *,
    statusline: bool,
    http_url: str | None = None,
    version: str | None = None,
) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's hooks, and ctxd's statusLine where allowed; plus notes for the user.

    The statusLine is ctxd's when none is set (with a note saying so), or when `statusline` is
    true; the user's own command is otherwise kept on screen, run by ctxd's client so that the
    daemon sees the payload too (`wrap_command`; a note says so and how to switch).
    """
    out = add_hooks(doc, hook_specs(command, http_url, version), is_ctxd_command)
    notes: list[str] = []
    left_out = [e for e, m in EVENTS if (e, m) not in events_for(version)]
    if left_out:
        why = f"Claude Code {version} predates it" if version else "no `claude --version` said"
        notes.append(
            f"hooks for {', '.join(left_out)} not registered ({why}; a release that does not "
            "know an event stops its UI at a settings warning): run `ctxd install claude` "
            "again after updating Claude Code"
        )
    if enabled_plugin(doc) is not None:
        notes.append(
            "the ctxd plugin is enabled too: every hook would run twice; keep one of the two "
            "(disable the plugin with /plugin, or run `ctxd uninstall claude`)"
        )
    current = out.get("statusLine")
    wanted = {"type": "command", "command": statusline_command}
    foreign = unwrap_command(current.get("command")) if isinstance(current, dict) else None
    if current is None:
        out["statusLine"] = wanted
        notes.append(
            "statusLine: none was set, so ctxd's line is now Claude Code's statusline "
            "(`ctxd uninstall claude --statusline` removes it and keeps the hooks)"
        )
    elif (
        statusline
        and isinstance(current, dict)
        and (foreign is not None or not is_ctxd_command(current.get("command")))
    ):
        own = user_statusline(current)
        out["statusLine"] = {**wanted, "command": replacing_command(statusline_command, own)}
        old = f"`{foreign}`" if foreign is not None else _describe(current)
        notes.append(
            f"statusLine {old} replaced by ctxd's; `ctxd uninstall claude` (or `--statusline`) "
            "puts it back exactly as it was"
        )
    elif foreign is not None:  # ctxd already runs the user's line: refresh ctxd's part
        updated = copy.deepcopy(current)
        updated["command"] = wrap_command(statusline_command, foreign)
        out["statusLine"] = updated
    elif isinstance(current, dict) and is_ctxd_command(current.get("command")):
        updated = copy.deepcopy(current)
        # ctxd's line that replaced the user's keeps carrying it, for uninstall.
        updated.update(
            wanted, command=replacing_command(statusline_command, user_statusline(current))
        )
        out["statusLine"] = updated
    elif isinstance(current, dict) and isinstance(current.get("command"), str):
        updated = copy.deepcopy(current)
        updated["command"] = wrap_command(statusline_command, current["command"])
        out["statusLine"] = updated
        notes.append(
            f"statusLine: your own `{current['command']}` still draws the line, run by ctxd's "
            "client, which also hands its payload to ctxd (the exact window); its output and "
            "exit code are unchanged, and `ctxd uninstall claude` puts the command back as it "
            "was. To show ctxd's line instead: `ctxd install claude --statusline`; to show "
            "ctxd's segment inside your line (ccstatusline's custom command widget, or your "
            f"script), run `{statusline_command}` with the payload on stdin"
        )
    elif statusline:
        own = current if isinstance(current, dict) else None
        out["statusLine"] = {**wanted, "command": replacing_command(statusline_command, own)}
        notes.append(
            f"statusLine {_describe(current)} replaced by ctxd's; "
            + (
                "`ctxd uninstall claude` (or `--statusline`) puts it back exactly as it was"
                if own is not None
                else "uninstalling ctxd removes ctxd's line (the old one is in the backup)"
            )
        )
    else:
        notes.append(
            f"statusLine left as is: {_describe(current)}. ctxd's hooks work without it; to show "
            "ctxd's line instead, run `ctxd install claude --statusline`"
        )
    return out, tuple(notes)


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's hooks and without ctxd's own statusLine (a foreign one stays; one
    that ctxd's client runs gets its own command back)."""
    out = remove_hooks(doc, is_ctxd_command)
    current: Any = out.get("statusLine")
    if not isinstance(current, dict) or not is_ctxd_command(current.get("command")):
        return out, ()  # none, or the user's own: it stays
    own = user_statusline(current)  # the one ctxd's client ran, or ctxd's line replaced
    if own is not None:
        out["statusLine"] = copy.deepcopy(own)
    else:
        del out["statusLine"]
    return out, ()
