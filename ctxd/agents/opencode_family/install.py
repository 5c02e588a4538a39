"""OpenCode: ctxd's plugin named in `~/.config/opencode/opencode.json` (`plugin`), as pure
transformations.

OpenCode 1.18.33 loads the plugins its config's `plugin` list names (npm packages or `file://`
URLs) besides those in `<config>/plugins/`. ctxd adds one entry, the `file://` URL of its plugin
as copied beside the hook client (`hookcmd.CLIENT_FILES`), and removes only that entry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ctxd.agents.hookcmd import client_dir
from ctxd.agents.spec import Check, InstallRequest, Json
from ctxd.paths import home

__all__ = [
    "PLUGIN",
    "checks",
    "install",
    "installed_plugin",
    "plugin_path",
    "settings_path",
    "uninstall",
]

#: The plugin's path inside the client directory.
PLUGIN = "opencode/ctxd.js"


def settings_path(env: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/opencode/opencode.json` (default `~/.config`)."""
    config = env.get("XDG_CONFIG_HOME") or str(home(env) / ".config")
    return Path(config) / "opencode" / "opencode.json"


def plugin_url(request: InstallRequest) -> str:
    directory = request.client_dir or client_dir(os.environ)
    return (directory / PLUGIN).absolute().as_uri()


def _ours(entry: object) -> bool:
    return isinstance(entry, str) and entry.startswith("file://") and entry.endswith(f"/{PLUGIN}")


def install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    plugins = doc.get("plugin")
    kept = [p for p in plugins if not _ours(p)] if isinstance(plugins, list) else []
    return {**doc, "plugin": [*kept, plugin_url(request)]}, ()


def uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    plugins = doc.get("plugin")
    if not isinstance(plugins, list) or not any(_ours(p) for p in plugins):
        return doc, ()
    kept = [p for p in plugins if not _ours(p)]
    new = {k: v for k, v in doc.items() if k != "plugin"}
    return ({**new, "plugin": kept} if kept else new), ()


def installed_plugin(doc: Json) -> str | None:
    """The `file://` URL of ctxd's plugin in the document's `plugin` list, if it is there."""
    plugins = doc.get("plugin")
    ours = [p for p in plugins if _ours(p)] if isinstance(plugins, list) else []
    return ours[0] if ours else None


def plugin_path(url: str) -> Path:
    """The file a `file://` URL names (`as_uri` quoted it: a space is %20)."""
    # Imported here: urllib.request loads http.client and email (~15 ms), and every command
    # that asks the agent registry (`ctxd handoff`, `replay`...) imports this module.
    from urllib.request import url2pathname

    return Path(url2pathname(urlsplit(url).path))


def checks(doc: Json) -> list[Check]:
    url = installed_plugin(doc)
    if url is None:
        return [
            Check(
                "opencode plugin",
                False,
                "ctxd's plugin is not in opencode.json",
                "`ctxd install opencode` if you use OpenCode",
                skipped=True,
            )
        ]
    path = plugin_path(url)
    ok = path.is_file()
    detail = f"{path} {'exists' if ok else 'is missing'}"
    return [Check("opencode plugin", ok, detail, None if ok else "ctxd install opencode")]
