"""The family: ctxd's plugin named in `~/.config/opencode/opencode.json` (Kilo's
`~/.config/kilo/kilo.json`) `plugin` list, as pure transformations.

OpenCode 1.18.33 (and Kilo 7.7.7) loads the plugins its config's `plugin` list names (npm
packages or `file://` URLs) besides those in `<config>/plugins/`. ctxd adds one entry, the
`file://` URL of its plugin as copied beside the hook client (`hookcmd.CLIENT_FILES`), and
removes only that entry. Each member has its own plugin file (`Family.plugin`), which tells the
daemon whose session a call is about.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ctxd.agents.hookcmd import client_dir
from ctxd.agents.opencode_family.family import Family
from ctxd.agents.spec import Check, InstallRequest, Json
from ctxd.paths import home

__all__ = [
    "checks",
    "install",
    "installed_plugin",
    "plugin_path",
    "settings_path",
    "uninstall",
]


def settings_path(family: Family, env: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/<folder>/<its first config name>` (default `~/.config`)."""
    config = env.get("XDG_CONFIG_HOME") or str(home(env) / ".config")
    return Path(config) / family.folder / family.config_names[0]


def plugin_url(family: Family, request: InstallRequest) -> str:
    directory = request.client_dir or client_dir(os.environ)
    return (directory / family.plugin).absolute().as_uri()


def _ours(family: Family, entry: object) -> bool:
    return (
        isinstance(entry, str)
        and entry.startswith("file://")
        and entry.endswith(f"/{family.plugin}")
    )


def install(family: Family, doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    plugins = doc.get("plugin")
    kept = [p for p in plugins if not _ours(family, p)] if isinstance(plugins, list) else []
    return {**doc, "plugin": [*kept, plugin_url(family, request)]}, ()


def uninstall(family: Family, doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    plugins = doc.get("plugin")
    if not isinstance(plugins, list) or not any(_ours(family, p) for p in plugins):
        return doc, ()
    kept = [p for p in plugins if not _ours(family, p)]
    new = {k: v for k, v in doc.items() if k != "plugin"}
    return ({**new, "plugin": kept} if kept else new), ()


def installed_plugin(family: Family, doc: Json) -> str | None:
    """The `file://` URL of ctxd's plugin in the document's `plugin` list, if it is there."""
    plugins = doc.get("plugin")
    ours = [p for p in plugins if _ours(family, p)] if isinstance(plugins, list) else []
    return ours[0] if ours else None


def plugin_path(url: str) -> Path:
    """The file a `file://` URL names (`as_uri` quoted it: a space is %20)."""
    # Imported here: urllib.request loads http.client and email (~15 ms), and every command
    # that asks the agent registry (`ctxd handoff`, `replay`...) imports this module.
    from urllib.request import url2pathname

    return Path(url2pathname(urlsplit(url).path))


def checks(family: Family, doc: Json) -> list[Check]:
    url = installed_plugin(family, doc)
    name = f"{family.name} plugin"
    if url is None:
        return [
            Check(
                name,
                False,
                f"ctxd's plugin is not in {family.config_names[0]}",
                f"`ctxd install {family.name}` if you use {family.title}",
                skipped=True,
            )
        ]
    path = plugin_path(url)
    ok = path.is_file()
    detail = f"{path} {'exists' if ok else 'is missing'}"
    return [Check(name, ok, detail, None if ok else f"ctxd install {family.name}")]
