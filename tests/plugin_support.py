"""What the tests of ctxd's OpenCode plugin and pi extension share (tests/clients/, tests/e2e/):
where pi's extension loader is, a plugin installed by `ctxd install` and held by a node process
the test talks to a line at a time, and a broken daemon that answers every hook with what the test
says, on a Unix socket of the test's own, recording what it was asked."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ctxd_wire as wire
import pytest

from ctxd.agents.opencode import installed_plugin
from ctxd.agents.pi.install import extension_path

if TYPE_CHECKING:
    from conftest import World

__all__ = ["JITI", "StandIn", "install_plugin", "node_script"]

#: pi's extension loader (jiti, which pi itself loads extensions with), where
#: tests/e2e/install-agents.sh installs pi 1.x, else pi 0.x.
_CACHE = Path(os.environ.get("CTXD_E2E_CACHE") or Path(__file__).parent / "e2e" / ".cache")
JITI = next(
    (
        path
        for path in (
            _CACHE / "pi/node_modules/jiti/lib/jiti.mjs",
            _CACHE / "npm/node_modules/jiti/lib/jiti.mjs",
        )
        if path.exists()
    ),
    _CACHE / "pi/node_modules/jiti/lib/jiti.mjs",
)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    return node


def install_plugin(world: World, agent: str) -> dict[str, str]:
    """`ctxd install agent` ("opencode" or "pi") in `world`; returns the environment a node
    script loads the installed plugin with: CTXD_PLUGIN_URL (OpenCode), or CTXD_JITI_URL and
    CTXD_EXTENSION (pi). Skips the test where node or pi's loader is not installed."""
    _node()
    if agent == "pi" and not JITI.exists():
        pytest.skip(f"no {JITI} to load pi's extension with: run tests/e2e/install-agents.sh")
    assert world.cli("install", agent).returncode == 0
    if agent == "opencode":
        doc = json.loads((world.config_home / "opencode" / "opencode.json").read_text())
        return {"CTXD_PLUGIN_URL": str(installed_plugin(doc))}
    return {"CTXD_JITI_URL": JITI.as_uri(), "CTXD_EXTENSION": extension_path(world.env)}


@contextlib.contextmanager
def node_script(world: World, script: str, env: dict[str, str]) -> Iterator[Callable[[str], Any]]:
    """`script` (an ES module) run by node in `world` with `env` added, for the whole block, as
    the agent holds its plugin; `send(line)` writes one line to its stdin and returns the JSON line
    it answers. At the end its stdin closes, and it must exit 0 with nothing on stderr."""
    with subprocess.Popen(
        [_node(), "--input-type=module", "-e", script],
        env={**world.env, **env},
        cwd=world.work,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        assert stdin is not None and stdout is not None and stderr is not None

        def send(line: str) -> Any:
            stdin.write(f"{line}\n")
            stdin.flush()
            answer = stdout.readline()
            assert answer, stderr.read()
            return json.loads(answer)

        try:
            yield send
            stdin.close()
            assert (proc.wait(10), stderr.read()) == (0, "")
        finally:
            proc.kill()


class StandIn:
    """A daemon that answers the hooks with `results` in turn, the last one for ever after (a
    broken one), on a Unix socket of its own, from a thread: it records each request's payload
    and, per answer, how many of its bytes the client took before hanging up."""

    def __init__(self, path: Path, results: tuple[bytes, ...]) -> None:
        self.path = path
        self.answers = [wire.frame(wire.OK_HEADER + b"\n" + r) for r in results]
        self.payloads: list[dict[str, Any]] = []
        self.sent: list[int] = []
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            # A client that hangs up mid-request (an agent exiting) ends that exchange only.
            with conn, contextlib.suppress(OSError, ValueError):
                conn.settimeout(10)
                body = wire.read_frame(conn, wire.MAX_REQUEST)
                self.payloads.append(json.loads(body.partition(b"\n")[2]))
                answer = self.answers[min(len(self.sent), len(self.answers) - 1)]
                self.sent.append(self._send(conn, answer))

    def _send(self, conn: socket.socket, answer: bytes) -> int:
        view = memoryview(answer)
        done = 0
        with contextlib.suppress(OSError):  # the client hung up
            while done < len(view):
                done += conn.send(view[done : done + 65536])
        return done

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        self._thread.join(5)
