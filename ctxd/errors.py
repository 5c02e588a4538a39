"""The small error tree every foreign exception is translated into at a boundary.

The CLI turns a `CtxdError` into one line on stderr and a non-zero exit; the daemon turns it
into an error answer. Nothing else should escape a boundary.
"""

__all__ = [
    "ConfigError",
    "CtxdError",
    "DaemonNotRunning",
    "DaemonUnavailable",
    "InvalidInput",
    "ProtocolError",
    "SettingsFileError",
    "TranscriptError",
    "UnsafeRuntimeDir",
]


class CtxdError(Exception):
    """Base of every error ctxd reports to a user."""

    exit_code = 2


class InvalidInput(CtxdError, ValueError):
    """A value from outside (a window, a payload, a config entry) is not usable."""


class TranscriptError(CtxdError):
    """A transcript is missing, unreadable, or in no known format."""


class DaemonUnavailable(CtxdError):
    """No daemon answers on the socket."""

    exit_code = 3


class DaemonNotRunning(DaemonUnavailable):
    """Nothing listens on the socket: no daemon has started, or it has stopped."""

    def __init__(self, message: str, socket: str) -> None:
        super().__init__(message)
        self.socket = socket


class ProtocolError(CtxdError):
    """A peer sent a frame that is not a valid ctxd request or response."""


class ConfigError(CtxdError):
    """The config file cannot be used; the last good config stays in force."""


class UnsafeRuntimeDir(CtxdError):
    """The runtime directory is not private to this user."""


class SettingsFileError(CtxdError):
    """An agent's settings file cannot be parsed or written; it was left untouched."""
