"""The native hook client (clients/ctxd_hook.c) against the Python one, byte for byte: on a real
socket, each sends the same request for the same arguments, environment and stdin, and prints
the same thing for every answer a daemon may give (garbage and silence included); and how
`ctxd install` builds it, swaps it, and falls back to the Python client without a compiler.
The behaviour both share (no daemon, spawning, bounded waits) is in test_hook_client.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import ctxd_wire as wire
import pytest

from ctxd.agents import hookcmd, nativeclient
from ctxd.errors import CtxdError

if TYPE_CHECKING:
    from conftest import World

NATIVE_SOURCE = Path(__file__).resolve().parents[2] / "clients" / "ctxd_hook.c"

PAYLOAD = b'{"session_id":"s1","hook_event_name":"PostToolUse","tool_name":"Bash"}'


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


#: What a daemon (or something in its place) may answer, by name.
ANSWERS = {
    "ok": _frame(wire.OK_HEADER + b'\n{"hookSpecificOutput":{"additionalContext":"hi"}}'),
    "ok-empty": _frame(wire.OK_HEADER + b"\n"),
    "ok-no-newline": _frame(wire.OK_HEADER),
    "ok-header-spaced": _frame(wire.OK_HEADER + b" \nwords"),
    "error": _frame(b'{"v":1,"ok":false,"error":"no such session"}\n'),
    "garbage": _frame(b"hello, I am not ctxd\n\x00\xff"),
    "over-the-limit": (wire.MAX_RESPONSE + 1).to_bytes(4, "big") + b"x" * 1000,
    "at-the-limit": _frame(wire.OK_HEADER + b"\n" + b"y" * (wire.MAX_RESPONSE - 18)),
    "truncated": (100).to_bytes(4, "big") + b"short",
    "nothing": b"",
    "half-a-prefix": b"\x00\x00",
}


@dataclass
class FakeDaemon:
    """A listener at the world's socket that records each request and answers `answer`."""

    path: Path
    answer: bytes = b""
    requests: list[bytes] = field(default_factory=list)
    server: socket.socket = field(init=False)

    def __post_init__(self) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    size = int.from_bytes(wire.recv_exactly(conn, 4), "big")
                    self.requests.append(wire.recv_exactly(conn, size))
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        self.server.close()
        self.thread.join(5)


@pytest.fixture
def fake(world: World) -> Iterator[FakeDaemon]:
    world.runtime_dir.mkdir(mode=0o700)
    daemon = FakeDaemon(world.socket)
    try:
        yield daemon
    finally:
        daemon.close()


def run(
    argv: list[str], args: tuple[str, ...], env: dict[str, str], stdin: bytes, cwd: Path
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*argv, *args], input=stdin, env=env, cwd=cwd, capture_output=True, timeout=20, check=False
    )


def both(
    world: World,
    fake: FakeDaemon,
    native: Path,
    args: tuple[str, ...],
    env: dict[str, str],
    stdin: bytes,
) -> None:
    """Run the Python client and the native one alike; they must send and print the same."""
    seen = []
    for argv in ([sys.executable, "-S", "-I", str(world.hook_client)], [str(native)]):
        fake.requests.clear()
        done = run(argv, args, env, stdin, world.work)
        seen.append((list(fake.requests), done.stdout, done.stderr, done.returncode))
    python, native_seen = seen
    assert native_seen == python
    assert python[3] == 0


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_both_clients_send_the_same_request_and_print_the_same_answer(
    world: World, fake: FakeDaemon, native_hook_client: Path, answer: str
) -> None:
    fake.answer = ANSWERS[answer]
    both(world, fake, native_hook_client, ("claude", "PostToolUse"), world.env, PAYLOAD)
    if answer in ("ok", "at-the-limit"):  # and the answers that print do print
        done = run([str(native_hook_client)], ("claude",), world.env, PAYLOAD, world.work)
        assert done.stdout == ANSWERS[answer][4 + len(wire.OK_HEADER) + 1 :]


CASES = {
    "no-event": (("gemini",), {}, PAYLOAD),
    "event": (("codex", "Stop"), {}, PAYLOAD),
    "empty-stdin": (("copilot", "postToolUse"), {}, b""),
    "binary-stdin": (("qwen",), {}, bytes(range(256)) * 4),
    "extra-arguments": (("claude", "Stop", "more"), {}, PAYLOAD),
    "passed-env": (
        ("claude",),
        {
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "80",
            "DISABLE_COMPACT": "",
            "CODEX_HOME": "/h/with space/.codex",
            "PI_CODING_AGENT_DIR": "/p",
        },
        PAYLOAD,
    ),
    "env-needing-escapes-left-out": (
        ("claude",),
        {
            "CLAUDE_CONFIG_DIR": 'a"b',
            "COPILOT_HOME": "back\\slash",
            "CODEX_HOME": "x" * (wire.MAX_ENV_VALUE + 1),
            "PI_CODING_AGENT_DIR": "tab\there",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "x" * wire.MAX_ENV_VALUE,
        },
        PAYLOAD,
    ),
    "no-agent": ((), {}, PAYLOAD),
    "agent-not-a-word": (("claude code",), {}, PAYLOAD),
    "event-too-long": (("claude", "e" * 65), {}, PAYLOAD),
    "dashes-only": (("--",), {}, PAYLOAD),
    "bad-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": "soon"}, PAYLOAD),
    "negative-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": "-1"}, PAYLOAD),
    "empty-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": ""}, PAYLOAD),
    "hex-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": "0x10"}, PAYLOAD),
    "infinite-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": "inf"}, PAYLOAD),
    "timeout-of-years": (("claude",), {"CTXD_HOOK_TIMEOUT": "1e9"}, PAYLOAD),
    "spaced-timeout": (("claude",), {"CTXD_HOOK_TIMEOUT": " 1.5 "}, PAYLOAD),
    "oversize-payload": (("claude",), {}, b"z" * (wire.MAX_PAYLOAD + 1)),
    "payload-at-the-limit": (("claude",), {}, b"z" * wire.MAX_PAYLOAD),
}


@pytest.mark.parametrize("case", list(CASES))
def test_both_clients_frame_the_same_request(
    world: World, fake: FakeDaemon, native_hook_client: Path, case: str
) -> None:
    args, extra, stdin = CASES[case]
    fake.answer = ANSWERS["ok"]
    both(world, fake, native_hook_client, args, {**world.env, **extra}, stdin)


def test_a_socket_path_over_the_unix_limit_fails_open(
    world: World, native_hook_client: Path
) -> None:
    env = {**world.env, "CTXD_SOCKET": str(world.root / ("d" * 120) / "ctxd.sock")}
    done = run([str(native_hook_client)], ("claude",), env, PAYLOAD, world.work)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.parametrize("client", ["python", "native"])
def test_a_closed_stdin_is_an_empty_payload_or_nothing(
    world: World, fake: FakeDaemon, native_hook_client: Path, client: str
) -> None:
    """Run with no fd 0 at all (an agent that closed it): exit 0 and nothing printed."""
    fake.answer = ANSWERS["ok"]
    argv = [str(native_hook_client)] if client == "native" else world.hook_argv
    done = subprocess.run(
        [*argv, "claude"],
        stdin=None,
        env=world.env,
        cwd=world.work,
        capture_output=True,
        timeout=10,
        check=False,
        preexec_fn=lambda: os.close(0),
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_native_client_names_what_the_python_one_does() -> None:
    """The constants the C source writes out are the Python client's: the variables passed
    on, the limits, the timeouts and the usage text (a new agent changes both)."""
    import re

    import ctxd_hook

    source = NATIVE_SOURCE.read_text()
    listed = re.search(r"HOOK_ENV\[\] = \{(.*?)\};", source, re.S)
    assert listed is not None
    assert re.findall(r'"(\w+)"', listed.group(1)) == list(wire.HOOK_ENV)
    usage = re.search(r"#define USAGE \\\n((?:\s*\".*\"(?: \\)?\n)+)", source)
    assert usage is not None
    text = "".join(re.findall(r'"(.*?)"', usage.group(1))).replace("\\n", "\n")
    assert text == ctxd_hook.USAGE
    defines = dict(re.findall(r"#define (\w+) ([^\n]+)", source))
    assert defines["MAX_PAYLOAD"] == "(8u * 1024 * 1024)" and wire.MAX_PAYLOAD == 8 * 1024 * 1024
    assert defines["MAX_RESPONSE"] == "(1024u * 1024)" and wire.MAX_RESPONSE == 1024 * 1024
    assert int(defines["MAX_ENV_VALUE"]) == wire.MAX_ENV_VALUE
    assert defines["OK_HEADER"] == '"{\\"v\\":1,\\"ok\\":true}"'
    assert wire.OK_HEADER == b'{"v":1,"ok":true}'
    for name in ("DEFAULT_TIMEOUT", "STDIN_WAIT", "WRAP_TIMEOUT", "SPAWN_BACKOFF", "SPAWN_WAIT"):
        assert float(defines[name]) == getattr(ctxd_hook, name), name


# ---------------------------------------------------------------------- built by ctxd install


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "PATH": os.environ.get("PATH", os.defpath),
        "CTXD_NO_SPAWN": "1",
    }


def needs_compiler(env: dict[str, str]) -> str:
    compiler = nativeclient.find_compiler(env)
    if compiler is None:
        pytest.skip("no C compiler here")
    return compiler


def test_install_builds_the_native_client_and_hooks_run_it(env: dict[str, str]) -> None:
    needs_compiler(env)
    directory = hookcmd.install_client(env)
    link = directory / nativeclient.LINK
    assert link.is_symlink() and nativeclient.current_build(directory) == link
    command = hookcmd.hook_command("gemini", "AfterTool", env)
    assert command == f"{link} gemini AfterTool"
    assert hookcmd.is_ctxd_command(command)
    built = (directory / os.readlink(link)).stat()
    # Nothing is rebuilt while the source is the same.
    hookcmd.install_client(env)
    assert (directory / os.readlink(link)).stat().st_ino == built.st_ino
    done = subprocess.run(command, shell=True, input=PAYLOAD, env=env, capture_output=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert "native (" in nativeclient.client_choice(directory, env).describe()


def _has_loader(binary: bytes) -> bool:
    """Whether an ELF-64 little-endian executable names a dynamic loader (a PT_INTERP header)."""
    phoff = int.from_bytes(binary[32:40], "little")
    size, count = (int.from_bytes(binary[o : o + 2], "little") for o in (54, 56))
    return any(
        int.from_bytes(binary[at : at + 4], "little") == 3  # PT_INTERP
        for at in range(phoff, phoff + size * count, size)
    )


def test_the_client_is_linked_statically_where_the_c_library_allows(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A hook process that skips the dynamic loader costs less on every tool call."""
    compiler = needs_compiler(env)
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    static = subprocess.run(
        [compiler, "-static", "-o", str(tmp_path / "probe"), str(probe)], capture_output=True
    )
    directory = hookcmd.install_client(env)
    binary = (directory / os.readlink(directory / nativeclient.LINK)).read_bytes()
    if not binary.startswith(b"\x7fELF\x02\x01"):
        pytest.skip("not a 64-bit little-endian ELF system")
    assert _has_loader(binary) == (static.returncode != 0)


def test_a_new_source_is_built_beside_and_swapped_in(env: dict[str, str]) -> None:
    needs_compiler(env)
    directory = hookcmd.install_client(env)
    old = os.readlink(directory / nativeclient.LINK)
    source = directory / nativeclient.SOURCE
    source.write_bytes(source.read_bytes() + b"\n/* the next version */\n")
    assert nativeclient.current_build(directory) is None  # the link names another source's
    choice = nativeclient.build(directory, env)
    new = os.readlink(directory / nativeclient.LINK)
    assert choice.native and new != old
    assert not (directory / old).exists() and (directory / new).is_file()


def test_without_a_compiler_hooks_keep_the_python_client(env: dict[str, str]) -> None:
    env["PATH"] = "/nonexistent"
    directory = hookcmd.install_client(env)
    choice = nativeclient.client_choice(directory, env)
    assert not choice.native and "no C compiler found" in choice.reason
    assert choice.describe().startswith("Python (")
    command = hookcmd.hook_command("claude", None, env)
    assert " -S -I -c " in command and command.endswith(" claude")
    # `ctxd-hook` in the client directory runs the Python client (the plugins' way in).
    launcher = directory / nativeclient.LINK
    assert not launcher.is_symlink() and launcher.read_bytes().startswith(b"#!/bin/sh\n")
    done = subprocess.run(
        [str(launcher), "claude"], input=PAYLOAD, env=env, capture_output=True, timeout=10
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    done = subprocess.run([str(launcher)], input=b"", env=env, capture_output=True, timeout=10)
    assert b"usage: ctxd-hook" in done.stderr


def test_the_switch_chooses_a_client(env: dict[str, str]) -> None:
    needs_compiler(env)
    python = hookcmd.install_client({**env, nativeclient.CHOICE_ENV: "python"})
    assert nativeclient.current_build(python) is None
    assert " -S -I -c " in hookcmd.hook_command(
        "claude", None, {**env, "CTXD_HOOK_CLIENT": "python"}
    )
    with pytest.raises(CtxdError, match="CTXD_HOOK_CLIENT=native"):
        hookcmd.install_client({**env, "PATH": "/nonexistent", "CTXD_HOOK_CLIENT": "native"})
    hookcmd.install_client({**env, "CTXD_HOOK_CLIENT": "native"})
    assert nativeclient.current_build(python) is not None


def test_a_failed_build_falls_back_and_is_not_retried(env: dict[str, str], tmp_path: Path) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    cc = tools / "cc"
    cc.write_text(
        f"#!/bin/sh\necho run >> {calls}\necho 'ctxd_hook.c:1: error: no headers' >&2\nexit 1\n"
    )
    cc.chmod(0o755)
    env["PATH"] = str(tools)
    directory = hookcmd.install_client(env)
    choice = nativeclient.client_choice(directory, env)
    assert not choice.native and "error: no headers" in choice.reason
    # once each way of linking (static, then dynamic)
    assert calls.read_text() == "run\n" * len(nativeclient.LINKING)
    hookcmd.install_client(env)  # the same source, the same compiler: not tried again
    assert calls.read_text() == "run\n" * len(nativeclient.LINKING)


@pytest.mark.parametrize("client", ["native", "python"])
def test_the_plugin_command_runs_the_per_user_client(
    env: dict[str, str], tmp_path: Path, client: str
) -> None:
    """The plugin's and the extension's hooks run the per-user client `ctxd install` made (the
    native one, or the Python one through its script), with no `ctxd-hook` on PATH."""
    if client == "native":
        needs_compiler(env)
    del env["XDG_DATA_HOME"]  # the default place, under HOME
    hookcmd.install_client({**env, nativeclient.CHOICE_ENV: client})
    run_dir = Path(env["XDG_RUNTIME_DIR"]) / "ctxd"
    run_dir.mkdir(parents=True, mode=0o700)
    fake = FakeDaemon(run_dir / "ctxd.sock", ANSWERS["ok"])
    try:
        done = subprocess.run(
            ["sh", "-c", hookcmd.plugin_command("claude")],
            input=PAYLOAD,
            env={**env, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=10,
        )
    finally:
        fake.close()
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout == b'{"hookSpecificOutput":{"additionalContext":"hi"}}'
    assert len(fake.requests) == 1 and b'"agent":"claude"' in fake.requests[0]


def test_without_a_per_user_client_the_plugin_command_runs_the_console_script(
    env: dict[str, str], tmp_path: Path
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ctxd-hook").write_text('#!/bin/sh\necho "console script $*"\n')
    (tools / "ctxd-hook").chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", hookcmd.plugin_command("gemini")],
        input=PAYLOAD,
        env={**env, "PATH": f"{tools}:/usr/bin:/bin"},
        capture_output=True,
        timeout=10,
    )
    assert (done.returncode, done.stdout) == (0, b"console script gemini\n")
