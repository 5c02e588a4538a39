"""What ctxd knows about one agent, behind one small interface: `AgentSpec`.

Each agent package (`ctxd.agents.<name>`: one per agent in `ctxd.agents.AGENTS`) builds one
`AgentSpec`; the rest of ctxd sees agents only through the registry of them (`ctxd.agents`). To
add an agent, add a package that builds one and list it in the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from ctxd.agents.dialect import Dialect
from ctxd.agents.digest import Facts
from ctxd.agents.reader import OpenReader
from ctxd.agents.store import SessionStore
from ctxd.core.compaction import (
    CompactionRule,
    CompactWindowRule,
    ConfigKey,
    IdleCompactionRule,
    ResumeCompactionRule,
)
from ctxd.core.events import StatuslineReport

if TYPE_CHECKING:  # the figures come from the core; only their type is needed here
    from ctxd.core.session import Figures

__all__ = [
    "PLACED_MARK",
    "AgentSpec",
    "Check",
    "Companion",
    "DocumentFormat",
    "InstallRequest",
    "Installer",
    "Json",
    "Packaged",
    "PlacedFile",
    "PluginRun",
    "Statusline",
    "TranscriptFiles",
]

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Check:
    """One line of `ctxd doctor`."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    #: Not applicable here (an agent you don't use, no service manager): neither ok nor a failure.
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class InstallRequest:
    """What an installer needs to know besides the settings document."""

    #: The settings file being edited.
    path: Path
    #: The hook command for this agent, for an event hint (None: the payload names the event).
    command: Callable[[str | None], str]
    #: The user asked to replace a foreign statusline (agents that have one).
    statusline: bool = False
    #: `--transport http`: the URL of the daemon's HTTP hooks for this agent (agents that can
    #: post their hooks); None: command hooks.
    http_url: str | None = None
    #: Where the hook client's copy is (and the plugins beside it: `hookcmd.CLIENT_FILES`).
    client_dir: Path | None = None
    #: The installed agent's version, as its `version_command` printed it (None: unknown).
    agent_version: str | None = None


@dataclass(frozen=True, slots=True)
class PluginRun:
    """How `ctxd doctor` runs an installed plugin: `argv` loads it in the agent's runtime, calls
    its tool-call hook once with a sample call and prints one JSON object, `{"output": the tool
    output the hook left, "ms": how long the hook took}`; empty when nothing here can run it."""

    argv: tuple[str, ...]
    #: What runs what, for doctor's line ("opencode (Bun) loading /path/ctxd.js").
    detail: str
    #: Variables the command needs besides the user's environment.
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Packaged:
    """ctxd's own plugin or extension, enabled in an agent."""

    #: "plugin", "extension": the agent's word for it.
    kind: str
    #: Which one, or where it is ("ctxd@ctxd", a folder).
    where: str
    #: The command its hooks run.
    command: str


#: The words inside every file `ctxd install` places (`PlacedFile`): what makes a file ctxd's,
#: so that a user's own file of the same name is never overwritten or removed.
PLACED_MARK = "written by `ctxd install`"


@dataclass(frozen=True, slots=True)
class PlacedFile:
    """A whole file `ctxd install` writes for an agent that reads files rather than a settings
    document (Cline's hook executables), and `ctxd uninstall` removes while it is still ctxd's.
    `text` must contain `PLACED_MARK`."""

    path: Path
    text: str
    mode: int = 0o755
    #: A file's text that ctxd's own instructions had the user save before ctxd placed its
    #: files itself (no mark in it): ctxd's too, replaced by install and removed by uninstall.
    earlier: Callable[[str], bool] = lambda text: False

    def __post_init__(self) -> None:
        if PLACED_MARK not in self.text:
            raise ValueError(f"{self.path}: a placed file must say it is ctxd's ({PLACED_MARK})")


@dataclass(frozen=True, slots=True)
class DocumentFormat:
    """A settings file that is not JSON (a TOML config): how its text becomes the document the
    installer transforms, and how a new document goes back into the user's text."""

    #: (text, None when there is no file; its path) -> the document; SettingsFileError when
    #: the text is not in the format.
    parse: Callable[[str | None, Path], Json]
    #: (new document, the file's text) -> the text to write; SettingsFileError when it cannot.
    render: Callable[[Json, str | None], str]


@dataclass(frozen=True, slots=True)
class Companion:
    """A second file the install edits beside the settings file (Kimi Code's tui.toml, which
    holds its status line): the same pure transformations of its own document."""

    #: The settings file's path -> this file's.
    path: Callable[[Path], Path]
    document: DocumentFormat
    install: Callable[[Json, InstallRequest], tuple[Json, tuple[str, ...]]]
    uninstall: Callable[[Json, InstallRequest], tuple[Json, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class Installer:
    """How ctxd wires itself into an agent's settings file (pure transformations)."""

    #: The settings file ctxd edits, in this environment.
    settings_path: Callable[[Mapping[str, str]], Path]
    #: (document, request) -> (new document, notes for the user).
    install: Callable[[Json, InstallRequest], tuple[Json, tuple[str, ...]]]
    uninstall: Callable[[Json, InstallRequest], tuple[Json, tuple[str, ...]]]
    #: Extra `ctxd doctor` lines for a parsed settings document (e.g. the statusline).
    checks: Callable[[Json], list[Check]] = lambda doc: []
    #: Extra `ctxd doctor` lines that need where the settings file is (a file beside it that
    #: decides whether the agent runs ctxd's hooks at all): (document, its path) -> lines.
    placed_checks: Callable[[Json, Path], list[Check]] = lambda doc, path: []
    #: The settings file's format, when it is not JSON.
    document: DocumentFormat | None = None
    #: A second file the install edits with the settings file, if any.
    companion: Companion | None = None
    #: `install` registers HTTP hooks when the request has an `http_url` (`--transport http`).
    http_hooks: bool = False
    #: False: the agent reads no hooks from a settings document (Cline CLI runs hook files):
    #: `install` changes none, and ctxd's hooks are the `files` it places.
    edits_settings: bool = True
    #: (environment, the hook command for an event hint) -> the files ctxd places for the agent
    #: (written by `ctxd install`, removed by `ctxd uninstall`, checked by `ctxd doctor`).
    files: Callable[[Mapping[str, str], Callable[[str | None], str]], tuple[PlacedFile, ...]] = (
        lambda env, command: ()
    )
    #: ctxd is a plugin the agent loads, not hook commands: `ctxd doctor` reports `checks`
    #: alone (they say "skipped" where ctxd is not installed).
    plugin: bool = False
    #: (document, environment) -> how to run the installed plugin, None when none is installed.
    plugin_run: Callable[[Json, Mapping[str, str]], PluginRun | None] | None = None
    #: (settings document, its path) -> ctxd's own package for the agent (a plugin or an
    #: extension that the agent loads and whose hooks run `hookcmd.plugin_command`) when it has it
    #: enabled: (what it is, its hook command). With ctxd's hooks installed too, every hook
    #: would run twice.
    packaged: Callable[[Json, Path], Packaged | None] = lambda doc, path: None


@dataclass(frozen=True, slots=True)
class Statusline:
    """An agent that runs a statusline command with its own figures (Claude Code)."""

    parse: Callable[[bytes], StatuslineReport]
    render: Callable[[str | None, Figures], bytes]


class TranscriptFiles(Protocol):
    """Where an agent writes its transcripts and how to recognise one (an agent's `files`
    module)."""

    def transcript_root(self, env: Mapping[str, str]) -> Path:
        """The directory under which the agent writes its transcripts (watched recursively)."""
        ...

    def is_transcript(self, path: str) -> bool:
        """A file under `transcript_root` is one of this agent's transcripts."""
        ...

    def has_layout(self, path: str) -> bool:
        """Any path has this agent's transcript layout (for `ctxd replay` of a copied file)."""
        ...

    def recognises(self, record: Mapping[str, Any]) -> bool:
        """The first decoded record of a file is this agent's."""
        ...

    def recognises_prefix(self, prefix: bytes) -> bool:
        """The start of a first line too long to decode whole is this agent's."""
        ...

    def session_id_from_path(self, path: str) -> str | None:
        """The session id a transcript's file name states, if any."""
        ...


def _no_path(path: str) -> str | None:
    return None


def _no_subagent(parent: str, agent_id: str) -> str | None:
    return None


def _no_settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    return ()


def _no_settings(data: bytes) -> dict[str, str]:
    return {}


def _no_facts(path: str | None) -> Facts | None:
    return None


def _no_configured_window(model: str | None, config: Mapping[str, str]) -> int | None:
    return None


def _no_window_sizes(model: str | None) -> tuple[int, ...]:
    return ()


def _no_implied_transcript(session_id: str, env: Mapping[str, str]) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class AgentSpec:
    #: The short name used on command lines, in the wire header and in state ("claude").
    name: str
    #: The product's name, for people ("Claude Code").
    title: str
    dialect: Dialect
    files: TranscriptFiles
    #: A fresh incremental reader for the transcript at a path (None: path unknown), telling
    #: the facts it decodes to a listener (`ctxd.agents.reader`).
    open_reader: OpenReader
    #: Its compaction rule; given the overrides of every agent, it reads its own (`for_agent`).
    compaction: CompactionRule
    installer: Installer
    #: Model id prefix -> window, built in (under the user's `[windows]`).
    windows: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: A subagent's transcript -> its parent session's transcript.
    parent_transcript: Callable[[str], str | None] = _no_path
    #: (parent transcript, subagent id) -> the subagent's own transcript, if it exists.
    subagent_transcript: Callable[[str, str], str | None] = _no_subagent
    statusline: Statusline | None = None
    #: The environment variables its compaction rule reads; the hook client passes them from
    #: the agent's own environment (`ctxd_wire.HOOK_ENV` is the union of all agents' lists).
    config_env: tuple[str, ...] = ()
    #: (environment, session cwd) -> the settings files the agent reads, lowest precedence
    #: first; the daemon reads them (cached, re-read when they change).
    settings_files: Callable[[Mapping[str, str], str | None], tuple[Path, ...]] = _no_settings_files
    #: One settings file's bytes -> the flat configuration its compaction rule reads ({} when
    #: the file is unusable; never raises).
    read_settings: Callable[[bytes], dict[str, str]] = _no_settings
    #: ctxd's own settings for its compaction rule: the keys of `[compaction.<name>]` in ctxd's
    #: config, checked by `ctxd.daemon.config` and read back by the rule.
    config_keys: tuple[ConfigKey[Any, Any], ...] = ()
    #: Fresh session-digest facts for the transcript at a path, the listener to give its
    #: reader (`ctxd.agents.digest`); None: no digest is kept for it.
    open_facts: Callable[[str | None], Facts | None] = _no_facts
    #: Where an agent that keeps its sessions in one database has them (its transcript files,
    #: if any, are followed as well); None: one transcript file per session.
    store: SessionStore | None = None
    #: (session id, environment) -> the transcript a hook that names none is about, where the
    #: agent's layout puts it by session id (None: the hook alone stands for the session).
    implied_transcript: Callable[[str, Mapping[str, str]], str | None] = _no_implied_transcript
    #: A second kind of compaction: when the agent compacts a session left idle, from the
    #: prompt cache it reports (`ctxd.core.compaction.IdleCompactionRule`); None: it does not.
    idle_compaction: IdleCompactionRule | None = None
    #: (model, its configuration as `read_settings` gave it) -> the window the agent's own
    #: settings give that model, over the built-in and configured tables (None: they give none).
    configured_window: Callable[[str | None, Mapping[str, str]], int | None] = _no_configured_window
    #: The window the agent's automatic compaction counts against and who decided it
    #: (`ctxd.core.compaction.CompactWindowRule`); None: the agent has no such notion.
    compact_window: CompactWindowRule | None = None
    #: The command that prints the installed agent's version (`InstallRequest.agent_version`:
    #: the hooks registered follow it); empty: the install does not depend on it.
    version_command: tuple[str, ...] = ()
    #: Whether the agent compacts a session resumed after its prompt cache expired
    #: (`ctxd.core.compaction.ResumeCompactionRule`); None: it never does.
    resume_compaction: ResumeCompactionRule | None = None
    #: Model -> the windows its owner states it with besides the table's (an earlier release's,
    #: the most its catalog allows; `ctxd.agents.models.sizes_of`): where a session holds more
    #: than the table's window, the smallest of them that holds it is the window.
    window_sizes: Callable[[str | None], tuple[int, ...]] = _no_window_sizes
    #: How far below its point the agent may compact, as a fraction of it: an agent that
    #: compares its estimate of the next request, not the last figure (`infer_window`).
    compaction_lead: float = 0.0
