"""Codex CLI: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.codex import files, install
from ctxd.agents.codex.compaction import (
    CONFIG_KEYS,
    REPORTED_SHARE,
    compaction_point,
    settings_config,
)
from ctxd.agents.codex.digest import CodexFacts
from ctxd.agents.codex.hooks import DIALECT
from ctxd.agents.codex.models import MODELS
from ctxd.agents.codex.transcript import CodexReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.spec import AgentSpec, Check, Installer, InstallRequest, Json
from ctxd.core.compaction import for_agent, share_of
from ctxd.untrusted import MAX_SETTINGS_BYTES, read_untrusted

__all__ = ["SPEC"]

NAME = "codex"


def _open_facts(path: str | None) -> CodexFacts:
    return CodexFacts()


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> CodexReader:
    return CodexReader(facts, usage)


def _read_config(path: Path) -> Json | None:
    try:
        return tomllib.loads(read_untrusted(path, MAX_SETTINGS_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError and UnicodeDecodeError too
        return None


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    return (files.codex_home(env) / "config.toml",)


def _read_settings(data: bytes) -> dict[str, str]:
    try:
        doc = tomllib.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # thousands of digits, nesting past the stack
        return {}
    return settings_config(doc)


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    new = install.install(doc, request.command(None))
    config_path = request.path.parent / "config.toml"
    config = _read_config(config_path)
    notes = install.notes(new, request.path, config, config_path, changed=new != doc)
    if config is None:
        notes = (f"{config_path} could not be read; trust state unknown", *notes)
    return new, notes


def _trust_checks(doc: Json, path: Path) -> list[Check]:
    config_path = path.parent / "config.toml"
    return install.trust_checks(doc, path, _read_config(config_path), config_path)


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc), ()


SPEC = AgentSpec(
    name=NAME,
    title="Codex CLI",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    config_keys=CONFIG_KEYS,
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        placed_checks=_trust_checks,
    ),
    # The compaction rule takes the window Codex reports: the table holds windows as reported.
    windows=MappingProxyType(
        {info.prefix: share_of(info.window, REPORTED_SHARE) for info in MODELS}
    ),
    config_env=("CODEX_HOME",),
    settings_files=_settings_files,
    read_settings=_read_settings,
    open_facts=_open_facts,
)
