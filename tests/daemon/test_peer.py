"""The owner of a loopback connection's other end, as the kernel names it: sock_diag's exact
lookup and /proc/net/tcp's row, for our own connection and another uid's."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

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


def _row(sl: int, local: str, remote: str, state: str, uid: int, inode: int) -> str:
    return (
        f"{sl:4d}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000 "
        f"{uid:5d}        0 {inode} 1 0000000000000000 20 4 30 10 -1\n"
    )


def test_a_batch_is_named_from_one_table_and_rows_without_an_inode_name_nobody(
    tmp_path: Path,
) -> None:
    """Every connection of a batch found in one read of the table; a row with no inode (an
    orphaned or time-wait socket, which the kernel prints as uid 0 whoever made it) names
    nobody, so a daemon run as root never takes a closed foreigner's request for its own."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        ours = f"0100007F:{listener.getsockname()[1]:04X}"
        clients = [socket.create_connection(listener.getsockname()) for _ in range(3)]
        accepted = [listener.accept()[0] for _ in clients]
        try:
            peers = {a.getpeername()[1]: a for a in accepted}
            rows = ["  sl  local_address rem_address   st ...\n"]
            rows.append(_row(0, ours, "00000000:0000", "0A", 0, 100))  # the listener
            uids = [1000, 0, 0]
            inodes = [501, 502, 0]  # the last: orphaned
            for i, port in enumerate(peers):
                local = f"0100007F:{port:04X}"
                rows.append(_row(i + 1, local, ours, "01", uids[i], inodes[i]))
                rows.append(_row(i + 10, ours, local, "01", 0, 900 + i))  # our side
            (tmp_path / "tcp").write_text("".join(rows))
            assert proc_net_uid(list(peers.values())[2], tmp_path) is None

            from ctxd.daemon.peer import table_uids

            assert table_uids(list(peers.values()), tmp_path) == [1000, 0, None]
        finally:
            for s in clients + accepted:
                s.close()
