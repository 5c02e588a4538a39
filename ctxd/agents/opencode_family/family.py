"""What one member of the OpenCode family is called where it keeps things: the declaration that
`ctxd.agents.opencode` and `ctxd.agents.kilo` each make, and everything in this package reads.

OpenCode and its fork Kilo CLI write the same database (tables, `step-finish` parts), load the
same plugins (`tool.execute.after`, `session.idle`, `session.compacted`) and compact by the same
rule; they differ in names (their data and config folders, database and config file names, the
variables that override them) and in what Kilo added (`compaction.threshold_percent`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Family"]


@dataclass(frozen=True, slots=True)
class Family:
    #: The agent's name in ctxd ("opencode") and its binary's name on PATH.
    name: str
    #: The product's name, for people ("OpenCode").
    title: str
    #: Its folder under `$XDG_DATA_HOME` (its database's) and under `$XDG_CONFIG_HOME`.
    folder: str
    #: The database's file name in the data folder.
    database: str
    #: The variable that names another database file.
    database_env: str
    #: Config file names read in each config folder and project directory, lowest precedence
    #: first; its global folder reads `config.json` before them.
    config_names: tuple[str, ...]
    #: The project's config folders (`.opencode`), each looked for on the walk up.
    dot_folders: tuple[str, ...]
    #: The variables naming one more config file, one more config folder, and turning the
    #: project's config off.
    config_env: str
    config_dir_env: str
    no_project_env: str
    #: ctxd's plugin for it, inside the client directory (`hookcmd.CLIENT_FILES`).
    plugin: str
    #: Tables only its database has (none: any database of the family's shape).
    own_tables: tuple[str, ...]
    #: Whether an export's `info.version` is one of its releases (it and its fork export the
    #: same document).
    exported_by: Callable[[str], bool]
    #: It reads `compaction.threshold_percent` (Kilo's).
    threshold_percent: bool = False
