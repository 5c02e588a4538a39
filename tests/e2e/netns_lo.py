"""Bring the loopback interface up inside a fresh network namespace (`unshare -rn`).

A new namespace has only `lo`, and it is down. `ip` may be missing, so this uses the
SIOCGIFFLAGS/SIOCSIFFLAGS ioctls directly; it needs CAP_NET_ADMIN in the namespace, which
`unshare -r` grants.
"""

from __future__ import annotations

import fcntl
import socket
import struct

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1


def bring_loopback_up() -> None:
    """Set IFF_UP on `lo`; raises OSError when not permitted."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, bytes(14))
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, bytes(14)))
