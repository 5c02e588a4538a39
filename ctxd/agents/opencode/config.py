"""OpenCode's own configuration, as the flat mapping its compaction rule and window read.

OpenCode 1.18.33 takes a model's limits from its catalogue (models.dev), overridden by its
config's `provider.<provider>.models.<model>.limit {context, input, output}` (a model declared
for a custom provider has only these), and compacts as `compaction {auto, reserved}` says. The
config is `opencode.json` (or `.jsonc`, comments allowed) in `$XDG_CONFIG_HOME/opencode/`, then
the file `OPENCODE_CONFIG` names, then the project's, in the session's directory and its
`.opencode/`; later files override earlier ones key by key, as OpenCode merges them. (OpenCode
also looks for the project's file in the directories above, up to the worktree's root; ctxd
reads the session's own directory only.)

The flat keys: `limit.<name>.<model>` (the model id its messages record, `modelID`) and
`compaction.<name>`, each value as JSON text.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxd.paths import home

__all__ = [
    "LIMITS",
    "configured_window",
    "limit",
    "setting",
    "settings_config",
    "settings_files",
]

#: The limits of a model that OpenCode's config can set.
LIMITS = ("context", "input", "output")
_COMPACTION = ("auto", "reserved")
_NAMES = ("opencode.json", "opencode.jsonc")


def settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    """OpenCode's config files for a session in `cwd`, lowest precedence first."""
    config = env.get("XDG_CONFIG_HOME") or str(home(env) / ".config")
    files = [Path(config) / "opencode" / name for name in _NAMES]
    if env.get("OPENCODE_CONFIG"):
        files.append(Path(env["OPENCODE_CONFIG"]))
    if cwd:
        files += [Path(cwd) / name for name in _NAMES]
        files += [Path(cwd) / ".opencode" / name for name in _NAMES]
    return tuple(files)


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
