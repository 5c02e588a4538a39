"""OpenCode's own configuration, as the flat mapping its compaction rule and window read.

OpenCode 1.18.33 takes a model's limits from its catalogue (models.dev), overridden by its
config's `provider.<provider>.models.<model>.limit {context, input, output}` (a model declared
for a custom provider has only these), and compacts as `compaction {auto, reserved}` says.
It merges its config files deeply, a later file's keys over an earlier one's, in this order
(`config_files`; `opencode.json` before `opencode.jsonc` wherever both are read):

  1. the global directory, `$XDG_CONFIG_HOME/opencode/` (`~/.config/opencode/`): `config.json`,
     `opencode.json`, `opencode.jsonc`;
  2. the file `OPENCODE_CONFIG` names;
  3. the project's `opencode.json`/`.jsonc` in the session's directory and every directory
     above it up to the top of the walk (`walk_top`), the top's first and the session's own
     last; none above it;
  4. the `opencode.json`/`.jsonc` of each `.opencode/` directory on that same walk, the
     session's own FIRST, so that a `.opencode/` higher up overrides a nearer one;
  5. `~/.opencode/`'s (once: it may be one of 4's), then `OPENCODE_CONFIG_DIR`'s.

`OPENCODE_DISABLE_PROJECT_CONFIG` (`1` or `true`) leaves out 3 and 4. Not followed: a login's
remote `.well-known` config (under all these), and `OPENCODE_CONFIG_CONTENT` (a variable's
text), an account's remote config and the managed directory (`/etc/opencode/`), over them.

Where the walk stops is ctxd's choice, not OpenCode's. OpenCode climbs to the git worktree's
root, and outside git to the filesystem's root (its "global" project has the worktree `/`), so
an OpenCode session in `/tmp/p` reads `/tmp/opencode.json`, which any local user can create. ctxd
reads those files in its daemon for every session of every user's agent that it serves, and
stops lower (`walk_top`): at the git worktree's root when the session's directory is in one (the
nearest directory above it, the home directory at most when it is under it, holding a `.git`
owned by this user: git itself refuses another user's repository as of "dubious ownership");
else at the home directory when it is under it; else nowhere above the session's own directory.
A config that OpenCode would read above those points (a `/tmp/opencode.json`, a
`/opencode.json`) is not read by ctxd: its figures for such a session may then differ from
OpenCode's; no one's files outside the user's home or repository can steer, stall or fill
the daemon. Every file is read as an untrusted one (`ctxd.untrusted`: a regular file, 4 MiB
at most).

The top of the walk is looked for once, when the daemon first lists a session directory's
files, and the files listed are then stat-checked as every agent's settings files are
(`daemon/agent_settings.py`), absent ones included, so that a config written later is read.

Kilo CLI (7.7.7) reads the same places under its own names (`family.Family`, declared in
`ctxd.agents.kilo`): `$XDG_CONFIG_HOME/kilo/` (`config.json`, `kilo.json`, `kilo.jsonc`,
`opencode.json`, `opencode.jsonc`: the order its log shows it loading them), `KILO_CONFIG`, the
project's `kilo.json(c)` and `opencode.json(c)`, its `.kilo`, `.kilocode` and `.opencode` folders
(the order among the three on one level is not verified), `KILO_CONFIG_DIR` and
`KILO_DISABLE_PROJECT_CONFIG`; and its `compaction.threshold_percent`.

The flat keys: `limit.<name>.<model>` (the model id its messages record, `modelID`) and
`compaction.<name>`, each value as JSON text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxd.agents.opencode_family.family import Family
from ctxd.paths import home
from ctxd.untrusted import holdable_path

__all__ = [
    "LIMITS",
    "config_files",
    "configured_window",
    "limit",
    "setting",
    "settings_config",
    "settings_files",
    "walk_top",
    "worktree_root",
]

#: The limits of a model that OpenCode's config can set.
LIMITS = ("context", "input", "output")
#: Kilo's `threshold_percent` is read for OpenCode too: its rule does not look at it.
_COMPACTION = ("auto", "reserved", "threshold_percent")
#: Read in the global config folder before the member's own names.
_GLOBAL_NAME = "config.json"


def settings_files(family: Family, env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    """The family member's config files for a session in `cwd`, lowest precedence first:
    `config_files` with the top of the walk looked for on disk."""
    if not cwd or not os.path.isabs(cwd) or not holdable_path(cwd):  # cwds come from its db too
        return config_files(family, env, None, None)
    cwd = os.path.normpath(cwd)  # a `..` must not take the walk above where it may go
    return config_files(family, env, cwd, walk_top(env, cwd))


def walk_top(env: Mapping[str, str], cwd: str) -> str:
    """The highest directory whose config files are read for a session in `cwd` (absolute,
    normalised): its git worktree's root, else the home directory when `cwd` is under it, else
    `cwd` itself (see the module docstring)."""
    start, home_dir = Path(cwd), home(env)
    # A home of `/` (some service accounts) would make every folder one under it.
    under_home = home_dir != Path(home_dir.anchor) and (
        start == home_dir or home_dir in start.parents
    )
    root = worktree_root(cwd, str(home_dir) if under_home else None)
    if root is not None:
        return root
    return str(home_dir) if under_home else cwd


def worktree_root(cwd: str, top: str | None = None) -> str | None:
    """The nearest of `cwd` and the directories above it, up to `top` (None: the root), that
    holds a `.git` (a directory, or the file of a linked worktree or a submodule) owned by this
    user; None outside git."""
    start = Path(cwd)
    uid = os.geteuid()
    for folder in (start, *start.parents):
        try:
            if os.stat(folder / ".git").st_uid == uid:
                return str(folder)
        except (OSError, ValueError):
            pass
        if top is not None and str(folder) == top:
            break
    return None


def config_files(
    family: Family, env: Mapping[str, str], cwd: str | None, top: str | None
) -> tuple[Path, ...]:
    """The files the family member reads for a session in `cwd` whose walk stops at `top`
    (`walk_top`; None, or a directory not above `cwd`: the session's directory alone), lowest
    precedence first, whether they exist or not (the order in the module docstring). Pure."""
    names, dots = family.config_names, family.dot_folders
    config = Path(env.get("XDG_CONFIG_HOME") or home(env) / ".config") / family.folder
    files = [config / name for name in (_GLOBAL_NAME, *names)]
    if env.get(family.config_env):
        files.append(Path(env[family.config_env]))
    project = env.get(family.no_project_env, "").lower() not in ("1", "true")
    walk = _up(Path(cwd), Path(top) if top else None) if cwd and project else []
    for folder in reversed(walk):
        files += [folder / name for name in names]
    # As OpenCode lists its config directories: the global one (read above, not again unless
    # it is OPENCODE_CONFIG_DIR), the walk's `.opencode/`s nearest first, ~/.opencode, then
    # OPENCODE_CONFIG_DIR; each once, at its first place.
    named = env.get(family.config_dir_env)
    extra = Path(named) if named else None
    home_dots = [home(env) / dot for dot in dots]
    dirs = [config, *(folder / dot for folder in walk for dot in dots), *home_dots]
    for folder in dict.fromkeys([*dirs, extra] if extra else dirs):
        if folder.name in dots or folder == extra:
            files += [folder / name for name in names]
    return tuple(files)


def _up(start: Path, top: Path | None) -> list[Path]:
    """`start` and the directories above it, nearest first, up to `top`; `start` alone when
    `top` is None or not one of them."""
    if top is None or (top != start and top not in start.parents):
        return [start]
    walk = [start]
    for folder in start.parents:
        if walk[-1] == top:
            break
        walk.append(folder)
    return walk


def settings_config(doc: Mapping[str, Any]) -> dict[str, str]:
    """The keys of a parsed opencode.json the rule and the window read (see the module
    docstring)."""
    out: dict[str, str] = {}
    providers = doc.get("provider")
    for provider in providers.values() if isinstance(providers, Mapping) else ():
        models = provider.get("models") if isinstance(provider, Mapping) else None
        for model, info in models.items() if isinstance(models, Mapping) else ():
            limits = info.get("limit") if isinstance(info, Mapping) else None
            for name in LIMITS:
                if isinstance(limits, Mapping) and name in limits:
                    out[f"limit.{name}.{model}"] = orjson.dumps(limits[name]).decode()
    compaction = doc.get("compaction")
    for name in _COMPACTION:
        if isinstance(compaction, Mapping) and name in compaction:
            out[f"compaction.{name}"] = orjson.dumps(compaction[name]).decode()
    return out


def _value(config: Mapping[str, str], key: str) -> Any:
    text = config.get(key)
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def limit(config: Mapping[str, str], name: str, model: str | None) -> int | None:
    """The model's `limit.<name>` in OpenCode's config: a whole number >= 0, else None."""
    if not model:
        return None
    value = _value(config, f"limit.{name}.{model}")
    return value if type(value) is int and value >= 0 else None


def setting(config: Mapping[str, str], name: str) -> Any:
    """`compaction.<name>` in OpenCode's config, as JSON gives it (None when not set)."""
    return _value(config, f"compaction.{name}")


def configured_window(model: str | None, config: Mapping[str, str]) -> int | None:
    """The window OpenCode's config gives the model (`limit.context`), if any (0, which makes
    OpenCode never compact, is no window)."""
    size = limit(config, "context", model)
    return size if size else None
