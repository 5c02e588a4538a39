"""ctxd's wire format, and where its socket lives: one stdlib-only definition for every side.

The hook client imports this module on every hook, so it uses only built-in modules (`_socket`,
`posix`, `sys`: nothing to find on disk, nothing that costs start-up time). ctxd's own client,
the server and the benchmarks import it too, so the two ends can never disagree.

A frame is a 4-byte big-endian length followed by that many bytes of body. A request body is a
JSON header line (`{"v":1,"op":...}`), a newline, and an optional raw payload (a hook's stdin,
forwarded untouched so that the hook client never parses JSON). An answer body is a JSON header
line (`{"v":1,"ok":true}` or `{"v":1,"ok":false,"error":"..."}`), a newline, and the result.
"""

import _socket
import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs start-up time; the checker alone needs it
    from collections.abc import Mapping

VERSION = 1
HEADER_SIZE = 4
#: The largest hook payload forwarded; agents cap tool output far below this.
MAX_PAYLOAD = 8 * 1024 * 1024
#: A request: a hook payload plus its header line.
MAX_REQUEST = MAX_PAYLOAD + 4096
#: A hook's answer (what the client prints). Status answers may be larger; see MAX_STATUS.
MAX_RESPONSE = 1024 * 1024
MAX_STATUS = 64 * MAX_RESPONSE
#: A successful answer starts with exactly these bytes (the server writes them; keep the order).
OK_HEADER = b'{"v":1,"ok":true}'
#: The agent's environment variables a hook passes on (the hook runs as the agent's child, so
#: its environment is the agent's): what the agents' compaction rules read, and where their
#: settings live: the union of every agent's `AgentSpec.config_env`, written out because this
#: module cannot import ctxd (tests/agents/test_agent_config.py holds the two equal).
HOOK_ENV = (
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "DISABLE_AUTO_COMPACT",
    "DISABLE_COMPACT",
    "CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "COPILOT_HOME",
    "PI_CODING_AGENT_DIR",
    "CLINE_DIR",
    "CLINE_DATA_DIR",
    "CLINE_SESSION_DATA_DIR",
    "KIMI_CODE_HOME",
    "KIMI_MODEL_NAME",
    "KIMI_MODEL_MAX_CONTEXT_SIZE",
)
#: The longest value passed on; a longer one is left out.
MAX_ENV_VALUE = 1024
_HOOK_ENV_BYTES = tuple(name.encode() for name in HOOK_ENV)
#: Bytes a JSON string cannot hold as they are: controls, DEL, the quote and the backslash.
_UNSAFE = bytes(range(32)) + b'\x7f"\\'

__all__ = [
    "HEADER_SIZE",
    "HOOK_ENV",
    "MAX_ENV_VALUE",
    "MAX_PAYLOAD",
    "MAX_REQUEST",
    "MAX_RESPONSE",
    "MAX_STATUS",
    "OK_HEADER",
    "VERSION",
    "FrameTooLarge",
    "environ",
    "frame",
    "frame_size",
    "hook_env",
    "hook_request",
    "ok_result",
    "peer_uid",
    "read_frame",
    "recv_exactly",
    "runtime_dir",
    "socket_path",
]


class FrameTooLarge(ValueError):
    """A frame announced more bytes than the reader allows."""


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(HEADER_SIZE, "big") + body


def frame_size(prefix: bytes, limit: int) -> int:
    """The body length a 4-byte prefix announces; FrameTooLarge when it is over `limit`."""
    size = int.from_bytes(prefix, "big")
    if size > limit:
        raise FrameTooLarge(f"frame of {size} bytes is over the limit of {limit}")
    return size


def recv_exactly(sock: "_socket.socket", size: int) -> bytes:
    """`size` bytes from a blocking socket; ConnectionError if the peer closes first."""
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("the connection closed before the answer was complete")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: "_socket.socket", limit: int) -> bytes:
    """One whole frame's body from a blocking socket (FrameTooLarge, ConnectionError)."""
    return recv_exactly(sock, frame_size(recv_exactly(sock, HEADER_SIZE), limit))


def hook_env(environ: "Mapping[bytes, bytes] | None" = None) -> bytes:
    """The `HOOK_ENV` variables set in `environ` (default: this process's), as the JSON object
    text of a request header's "env". A value that would need escaping in JSON (a quote, a
    backslash, a control or non-ASCII character) or is longer than MAX_ENV_VALUE is left out:
    the values that matter are numbers, flags and plain paths."""
    environ = posix.environ if environ is None else environ
    parts = []
    for name in _HOOK_ENV_BYTES:
        value = environ.get(name)
        # One C-level pass: a value that loses a byte to the deletion needed escaping.
        if value is None or len(value) > MAX_ENV_VALUE or not value.isascii():
            continue
        if len(value.translate(None, _UNSAFE)) != len(value):
            continue
        parts.append(b'"%s":"%s"' % (name, value))
    return b"{" + b",".join(parts) + b"}"


def hook_request(
    agent: str, event: "str | None", payload: bytes, env: "bytes | None" = None
) -> bytes:
    """One framed hook request. `agent` and `event` go into the header unescaped, so the caller
    passes plain words only; `env` is `hook_env()`'s object text (None: no "env" key)."""
    event_json = f'"{event}"' if event else "null"
    head = f'{{"v":{VERSION},"op":"hook","agent":"{agent}","event":{event_json}'.encode()
    env_json = b"" if env is None else b',"env":' + env
    return frame(head + env_json + b"}\n" + payload)


def ok_result(body: bytes) -> "bytes | None":
    """The result of a successful answer body; None for an error answer or garbage."""
    header, _, result = body.partition(b"\n")
    return result if header == OK_HEADER else None


def peer_uid(sock: "_socket.socket") -> "int | None":
    """The uid of the process at the other end of a Unix socket; None where the platform
    cannot tell (Linux SO_PEERCRED; macOS LOCAL_PEERCRED)."""
    so_peercred = getattr(_socket, "SO_PEERCRED", None)
    if so_peercred is not None:  # struct ucred {pid_t pid; uid_t uid; gid_t gid}
        creds = sock.getsockopt(_socket.SOL_SOCKET, so_peercred, 12)
        return int.from_bytes(creds[4:8], sys.byteorder)
    local_peercred = getattr(_socket, "LOCAL_PEERCRED", None)
    if local_peercred is not None:  # struct xucred {u_int version; uid_t uid; ...}
        creds = sock.getsockopt(0, local_peercred, 8)
        return int.from_bytes(creds[4:8], sys.byteorder)
    return None


def environ() -> "dict[str, str]":
    """The process environment as str, from `posix` (whose keys and values are bytes)."""
    return {
        key.decode(errors="surrogateescape"): value.decode(errors="surrogateescape")
        for key, value in posix.environ.items()
    }


def runtime_dir(env: "Mapping[str, str] | None" = None) -> str:
    """The private directory holding the socket: the directory of `CTXD_SOCKET` when set, else
    `$XDG_RUNTIME_DIR/ctxd`, else `$XDG_STATE_HOME/ctxd/run` (default `~/.local/state`)."""
    env = environ() if env is None else env
    socket_override = env.get("CTXD_SOCKET")
    if socket_override:
        return socket_override.rpartition("/")[0] or "."
    xdg_runtime = env.get("XDG_RUNTIME_DIR")
    if xdg_runtime:
        return xdg_runtime + "/ctxd"
    state_home = env.get("XDG_STATE_HOME") or (_home(env) + "/.local/state")
    return state_home + "/ctxd/run"


def socket_path(env: "Mapping[str, str] | None" = None) -> str:
    """Where the daemon listens: `CTXD_SOCKET` if set, else `<runtime_dir>/ctxd.sock`."""
    env = environ() if env is None else env
    return env.get("CTXD_SOCKET") or runtime_dir(env) + "/ctxd.sock"


def _home(env: "Mapping[str, str]") -> str:
    home = env.get("HOME")
    if home:
        return home
    import os  # rare: no HOME at all

    return os.path.expanduser("~")
