"""The owner of a loopback connection's other end, as the kernel names it: sock_diag's exact
lookup and /proc/net/tcp's row, for our own connection and another uid's."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest

from ctxd.daemon.peer import PeerOwner, proc_net_uid

NOBODY = 65534


def test_the_kernel_names_each_peers_owner() -> None:
    """sock_diag's exact lookup and the row of /proc/net/tcp agree: ours, and nobody's."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to connect as a second real uid")
    owner = PeerOwner()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as ours:
            mine, _ = listener.accept()
            with mine:
                assert owner.uid(mine) == proc_net_uid(mine) == os.getuid()
            del ours
        code = f"import socket,time;s=socket.create_connection(('127.0.0.1',{port}));time.sleep(5)"
        nobody = subprocess.Popen(
            [
                *("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"),
                *(sys.executable, "-I", "-c", code),
            ],
            cwd="/",
        )
        try:
            theirs, _ = listener.accept()
            with theirs:
                assert owner.uid(theirs) == proc_net_uid(theirs) == NOBODY
        finally:
            nobody.kill()
            nobody.wait()
    assert not owner._netlink_failed
    owner.close()
