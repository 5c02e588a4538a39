"""OpenCode: what ctxd knows about it is the OpenCode family's (`ctxd.agents.opencode_family`),
under OpenCode's own names: this declaration."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path

from ctxd.agents.opencode_family import Family, family_spec
from ctxd.agents.opencode_family import config as _config
from ctxd.agents.opencode_family import install as _install
from ctxd.agents.opencode_family import store as _store

__all__ = ["FAMILY", "SPEC", "config_files", "database_path", "installed_plugin"]


def _is_opencode_release(version: str) -> bool:
    # OpenCode's releases are 0.x and 1.x; Kilo's CLI started at 7.0.
    major = version.split(".", 1)[0]
    return not major.isdigit() or int(major) < 7


FAMILY = Family(
    name="opencode",
    title="OpenCode",
    folder="opencode",
    database="opencode.db",
    database_env="OPENCODE_DB",
    config_names=("opencode.json", "opencode.jsonc"),
    dot_folders=(".opencode",),
    config_env="OPENCODE_CONFIG",
    config_dir_env="OPENCODE_CONFIG_DIR",
    no_project_env="OPENCODE_DISABLE_PROJECT_CONFIG",
    plugin="opencode/ctxd.js",
    own_tables=(),
    exported_by=_is_opencode_release,
)

SPEC = family_spec(FAMILY)


def database_path(env: Mapping[str, str]) -> Path:
    """OpenCode's database in this environment (`store.database_path`)."""
    return _store.database_path(FAMILY, env)


config_files = partial(_config.config_files, FAMILY)
installed_plugin = partial(_install.installed_plugin, FAMILY)
