"""Codex CLI: ctxd's hooks in `$CODEX_HOME/hooks.json`, and what Codex needs to run them.

Codex runs a non-managed hook only after the user trusted it, and skips the others without a
word. Trust is recorded per hook in `$CODEX_HOME/config.toml`, as
`[hooks.state."<hooks.json path>:<event>:<group>:<handler>"] trusted_hash = "sha256:..."`, with a
hash Codex computes over its own internal form of the hook. Codex offers no way to grant it without
its review screen (the startup "Hooks need review" prompt, or `/hooks`), and forging the hash
would bypass the user's consent, so ctxd does not write it: it says exactly what to do instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.codex.files import codex_home
from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.hookmap import HookSpec, Json, add_hooks, positions, remove_hooks
from ctxd.agents.spec import Check

AGENT = "codex"
#: Seconds (Codex's unit).
TIMEOUT = 10
#: Codex clamps SessionEnd (and Interrupt) hooks to 3 s and warns about larger values.
SESSION_END_TIMEOUT = 3
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("PostToolUse", "*"),
    ("Stop", None),
    ("PreCompact", None),
    ("PostCompact", None),
    ("SessionEnd", None),
)

__all__ = [
    "EVENTS",
    "hook_specs",
    "install",
    "notes",
    "settings_path",
    "trust_checks",
    "trust_instructions",
    "trust_keys",
    "uninstall",
]


def settings_path(env: Mapping[str, str]) -> Path:
    """`$CODEX_HOME/hooks.json`, else `~/.codex/hooks.json`."""
    return codex_home(env) / "hooks.json"


def hook_specs(command: str) -> tuple[HookSpec, ...]:
    """One command hook per event ctxd needs, SessionEnd within Codex's 3 s clamp."""
    specs = []
    for event, matcher in EVENTS:
        timeout = SESSION_END_TIMEOUT if event == "SessionEnd" else TIMEOUT
        handler = {"type": "command", "command": command, "timeout": timeout}
        specs.append(HookSpec(event, matcher, handler))
    return tuple(specs)


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_keys(doc: Json, hooks_path: Path) -> tuple[str, ...]:
    """The `[hooks.state]` keys Codex files ctxd's hooks under (one per ctxd handler)."""
    return tuple(
        f"{hooks_path}:{_snake(event)}:{group}:{handler}"
        for event, group, handler in positions(doc, is_ctxd_command)
    )


def _trusted(config: Mapping[str, Any], key: str) -> bool:
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    entry = state.get(key) if isinstance(state, dict) else None
    return isinstance(entry, dict) and bool(entry.get("trusted_hash"))


def trust_instructions(config_path: Path) -> str:
    """What the user must do once for Codex to run ctxd's hooks."""
    return (
        "Codex runs only hooks you trusted and skips the others silently. Start `codex` in a "
        'terminal once: at "Hooks need review" choose "Review hooks" (or type /hooks), check '
        "that the hooks import ctxd_hook (ctxd's client, copied under ~/.local/share/ctxd), and "
        'trust them ("Trust all and continue", or t in /hooks). Codex records this in '
        f"{config_path} under [hooks.state] and asks again whenever a hook's command changes "
        "(e.g. after ctxd is installed with another Python). `codex exec` cannot ask: trust the "
        "hooks interactively first, or run it with --dangerously-bypass-hook-trust."
    )


def notes(
    doc: Json,
    hooks_path: Path,
    config: Mapping[str, Any] | None,
    config_path: Path,
    *,
    changed: bool,
) -> tuple[str, ...]:
    """Notes about trust and switches in `config.toml` (`config`: parsed, None if unreadable)."""
    out: list[str] = []
    features = config.get("features") if config else None
    if isinstance(features, dict) and (
        features.get("hooks") is False or features.get("codex_hooks") is False
    ):
        out.append(f"[features] hooks = false in {config_path}: Codex runs no hooks at all")
    keys = trust_keys(doc, hooks_path)
    if not keys:
        return tuple(out)
    if not changed and config is not None and all(_trusted(config, key) for key in keys):
        out.append(
            f"{config_path} has a trust record for each of ctxd's hooks; if Codex still skips "
            "them, open /hooks in codex to review them again"
        )
    else:
        out.append(trust_instructions(config_path))
    return tuple(out)


def trust_checks(
    doc: Json, hooks_path: Path, config: Mapping[str, Any] | None, config_path: Path
) -> list[Check]:
    """`ctxd doctor`'s line on whether Codex will run ctxd's hooks in `doc` at all: each has a
    trust record in `config` (parsed `config.toml`, None if unreadable). Whether a record's
    hash is still the hook's, only Codex can tell."""
    keys = trust_keys(doc, hooks_path)
    if not keys:
        return []
    name = "codex hook trust"
    if config is None:
        return [Check(name, False, f"{config_path} cannot be read: trust unknown", "fix the file")]
    untrusted = [key for key in keys if not _trusted(config, key)]
    if not untrusted:
        return [Check(name, True, f"each of ctxd's {len(keys)} hooks is trusted in {config_path}")]
    return [
        Check(
            name,
            False,
            f"{len(untrusted)} of ctxd's {len(keys)} hooks have no trust record in {config_path}: "
            "Codex skips them without a word",
            trust_instructions(config_path),
        )
    ]


def install(doc: Json, command: str) -> Json:
    """`doc` with ctxd's hooks (appended after the user's, so their trust keys do not move)."""
    return add_hooks(doc, hook_specs(command), is_ctxd_command)


def uninstall(doc: Json) -> Json:
    """`doc` without ctxd's hooks."""
    return remove_hooks(doc, is_ctxd_command)
