"""A flood of session ids (a runaway script, an agent that makes one per call): each id a hook
names opens a session, so without a bound the daemon's memory, its status and its snapshot grow
with every one. A real daemon, raw hooks on its socket."""

from __future__ import annotations

import json

from daemon_proc import Home, exchange, proc_status_kib, request_frame
from test_hardening_untrusted import RSS_BOUND_KIB, _probe_still_warned, _tool_call

FLOOD = 60_000


def test_sixty_thousand_session_ids_keep_the_daemon_bounded(home: Home) -> None:
    """On main each id was kept until idle for a day: 60,000 of them grew the daemon by 45 MB,
    100,000 by 75 MB (with a 71 MB snapshot and a 2.9 s status). A session backed by its
    transcript outlives the flood: its warning is not given again."""
    proc = home.start()
    probe = home.claude()
    probe.assistant(650_000)
    _probe_still_warned(home, probe)
    payload, _ = _tool_call("claude", "", home.work)
    before = proc_status_kib(proc.pid, "VmRSS")
    for n in range(FLOOD):
        payload["session_id"] = f"flood-{n:06d}"
        data = json.dumps(payload).encode()
        header, _ = exchange(home.socket, request_frame("hook", data, agent="claude", event=None))
        assert header["ok"], header
    grown = proc_status_kib(proc.pid, "VmRSS") - before
    assert grown < RSS_BOUND_KIB, f"the daemon grew by {grown:,} KiB"
    row = home.row(probe)
    assert row is not None and row["warned"] == "warning", row
    assert home.hook_out(probe.payload("PostToolUse")) is None  # not warned twice
    rows = home.status(timeout=5.0)["sessions"]
    assert len(rows) <= 20_001, len(rows)
    assert "least recently heard" in home.log(), home.log_tail()
