"""Kimi Code: everything ctxd knows about it, as one `AgentSpec`.

Its figures: each model request's usage is in the session's wire file (`usage.record`, exact
figures from the provider); the window is its configuration's (config.toml's models, or
`KIMI_MODEL_MAX_CONTEXT_SIZE`) or its status line's. Hooks name the session by id alone, and
`implied_transcript` finds its wire file from it. Only UserPromptSubmit's answer reaches the model,
and Stop can be blocked once a turn.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.kimi import files, install, tui
from ctxd.agents.kimi.compaction import (
    ENV_MODEL,
    ENV_WINDOW,
    WINDOWS,
    compaction_point,
    configured_window,
    settings_config,
)
from ctxd.agents.kimi.digest import KimiFacts
from ctxd.agents.kimi.hooks import DIALECT
from ctxd.agents.kimi.statusline import parse_statusline, render_figures
from ctxd.agents.kimi.transcript import KimiReader
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.spec import (
    AgentSpec,
    Companion,
    DocumentFormat,
    Installer,
    InstallRequest,
    Json,
    Statusline,
)
from ctxd.core.compaction import for_agent

__all__ = ["SPEC"]

NAME = "kimi"


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> KimiReader:
    return KimiReader(facts)  # its usage work is a few keys of a few records: always done


def _open_facts(path: str | None) -> KimiFacts:
    return KimiFacts()


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    return (install.settings_path(env),)


def _read_settings(data: bytes) -> dict[str, str]:
    try:
        doc = tomllib.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # TOMLDecodeError too; nesting past the stack
        return {}
    return settings_config(doc)


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.install(doc, request.command(None)), ()


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc), ()


SPEC = AgentSpec(
    name=NAME,
    title="Kimi Code",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=for_agent(NAME, compaction_point),
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        checks=install.checks,
        placed_checks=install.statusline_checks,
        document=DocumentFormat(parse=install.parse, render=install.render),
        companion=Companion(
            path=tui.tui_path,
            document=DocumentFormat(parse=install.parse, render=tui.render),
            install=tui.install,
            uninstall=tui.uninstall,
        ),
    ),
    windows=MappingProxyType(dict(WINDOWS)),
    statusline=Statusline(parse=parse_statusline, render=render_figures),
    settings_files=_settings_files,
    read_settings=_read_settings,
    configured_window=configured_window,
    implied_transcript=files.implied_transcript,
    open_facts=_open_facts,
    # Its home (where the hook's session is found), and the model and window its environment
    # may set over config.toml.
    config_env=("KIMI_CODE_HOME", ENV_MODEL, ENV_WINDOW),
)
