"""Kilo CLI (`@kilocode/cli`, `kilo`), a fork of OpenCode: what ctxd knows about it is the
OpenCode family's (`ctxd.agents.opencode_family`), under Kilo's names: this declaration.

Verified against Kilo 7.7.7 (tests/data/transcripts/kilo-7.7.7/, tests/e2e/test_kilo_e2e.py):
its sessions are in `$XDG_DATA_HOME/kilo/kilo.db` (`KILO_DB` overriding it; a build of another
channel than latest, beta or prod writes `kilo-<channel>.db`, which ctxd follows when `KILO_DB`
names it), with OpenCode's tables and parts plus tables of its own (`kilo_board`); its config is
`~/.config/kilo/` (`config.json`, `kilo.json`, `kilo.jsonc`, `opencode.json`, `opencode.jsonc`),
the project's `kilo.json(c)`/`opencode.json(c)` and those of its `.kilo`, `.kilocode` and
`.opencode` folders; it loads OpenCode's plugins and compacts by OpenCode's rule, lowered by
`compaction.threshold_percent` (`opencode_family.compaction.threshold_point`).
"""

from __future__ import annotations

from ctxd.agents.opencode_family import Family, family_spec

__all__ = ["FAMILY", "SPEC"]


def _is_kilo_release(version: str) -> bool:
    # Kilo's CLI releases start at 7.0 (OpenCode's are 0.x and 1.x).
    major = version.split(".", 1)[0]
    return major.isdigit() and int(major) >= 7


FAMILY = Family(
    name="kilo",
    title="Kilo CLI",
    folder="kilo",
    database="kilo.db",
    database_env="KILO_DB",
    config_names=("kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc"),
    dot_folders=(".kilo", ".kilocode", ".opencode"),
    config_env="KILO_CONFIG",
    config_dir_env="KILO_CONFIG_DIR",
    no_project_env="KILO_DISABLE_PROJECT_CONFIG",
    plugin="kilo/ctxd.js",
    own_tables=("kilo_board",),
    exported_by=_is_kilo_release,
    threshold_percent=True,
)

SPEC = family_spec(FAMILY)
