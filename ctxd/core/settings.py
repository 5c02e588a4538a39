"""The settings the core decides with: frozen values, resolved once at the edge.

`ctxd.daemon.config` reads them from the user's TOML file; everything here only validates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from ctxd.core.compaction import CompactionOverrides
from ctxd.core.measure import Basis
from ctxd.core.window import DEFAULT_WINDOW
from ctxd.errors import InvalidInput

__all__ = [
    "ContinuitySettings",
    "HandoffSettings",
    "ModelSwitchSettings",
    "SessionSettings",
    "Settings",
    "Thresholds",
]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Warn at `warning` % remaining, escalate at `critical` % remaining (on `basis`); repeat a
    warning of the same or a lower level only every `debounce` tool calls."""

    warning: float = 35.0
    critical: float = 25.0
    basis: Basis = "compaction"
    debounce: int = 5
    #: Absolute limits in context tokens, beside the percentages (None: unset): whichever
    #: comes first sets the level.
    warning_tokens: int | None = None
    critical_tokens: int | None = None

    def __post_init__(self) -> None:
        w, c = self.warning_tokens, self.critical_tokens
        if (w is not None and w < 1) or (c is not None and c < 1):
            raise InvalidInput("warning_tokens and critical_tokens must be at least 1")
        if w is not None and c is not None and c < w:
            raise InvalidInput(f"critical_tokens ({c}) must not be below warning_tokens ({w})")
        if not 0 <= self.critical <= self.warning <= 100:
            raise InvalidInput(
                f"thresholds must satisfy 0 <= critical <= warning <= 100, "
                f"got critical={self.critical}, warning={self.warning}"
            )
        if self.basis not in ("compaction", "window"):
            raise InvalidInput(f"basis must be 'compaction' or 'window', got {self.basis!r}")
        if self.debounce < 1:
            raise InvalidInput(f"debounce must be at least 1, got {self.debounce}")


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    """Ask for a handoff note on Stop once `at` % is used; `action` says how: a message to the
    user, or a Stop block that makes the agent write it."""

    enabled: bool = True
    at: float = 70.0
    action: Literal["message", "block"] = "message"

    def __post_init__(self) -> None:
        if not 0 < self.at <= 100:
            raise InvalidInput(f"handoff threshold must be in (0, 100], got {self.at}")
        if self.action not in ("message", "block"):
            raise InvalidInput(f"handoff action must be 'message' or 'block', got {self.action!r}")


@dataclass(frozen=True, slots=True)
class SessionSettings:
    idle_seconds: float = 6 * 3600
    ended_keep_seconds: float = 15 * 60


@dataclass(frozen=True, slots=True)
class ContinuitySettings:
    """The session digest's uses: the note injected once after each compaction (`inject`,
    at most `compact_tokens`), and the handoff draft written at the handoff point
    (`handoff_file`, at most `handoff_tokens`). Both are on by default; `inject = false` turns
    the note off."""

    inject: bool = True
    compact_tokens: int = 1000
    handoff_file: bool = True
    handoff_tokens: int = 2000

    def __post_init__(self) -> None:
        if not 100 <= self.compact_tokens <= 20_000:
            raise InvalidInput(f"compact_tokens must be 100 to 20000, got {self.compact_tokens}")
        if not 200 <= self.handoff_tokens <= 50_000:
            raise InvalidInput(f"handoff_tokens must be 200 to 50000, got {self.handoff_tokens}")


@dataclass(frozen=True, slots=True)
class ModelSwitchSettings:
    """What to do when a model switch lands past the new model's compaction point (or its
    window): "warn" tells the user before the switch; "deny" refuses it."""

    action: Literal["warn", "deny"] = "warn"

    def __post_init__(self) -> None:
        if self.action not in ("warn", "deny"):
            raise InvalidInput(f"model_switch.action must be warn or deny, got {self.action!r}")


@dataclass(frozen=True, slots=True)
class Settings:
    thresholds: Thresholds = Thresholds()
    handoff: HandoffSettings = HandoffSettings()
    #: Model id (or prefix) -> window: the agents' built-in table under the user's `[windows]`.
    windows: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: Agent -> the table its sessions are judged with instead of `windows`: the agent's own
    #: rows over the other agents' (one model id can run with another window in another
    #: agent), still under the user's `[windows]`. Agents without rows of their own use `windows`.
    agent_windows: Mapping[str, Mapping[str, int]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    default_window: int = DEFAULT_WINDOW
    #: Agent name -> the user's `[compaction.<agent>]` values, as the agent's keys took them.
    compaction: CompactionOverrides = field(default_factory=lambda: MappingProxyType({}))
    sessions: SessionSettings = SessionSettings()
    continuity: ContinuitySettings = ContinuitySettings()
    model_switch: ModelSwitchSettings = ModelSwitchSettings()
