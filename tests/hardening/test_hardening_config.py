"""A config value the policy refuses is a config error, never a crash."""

from __future__ import annotations

import time

from daemon_proc import Home


def test_handoff_at_zero_is_a_config_error_not_a_crash(home: Home) -> None:
    """`[handoff] at = 0` passed config validation, then the policy raised: read
    by housekeeping it killed the daemon with a traceback, read by a hook it failed that hook
    silently, and `config_error` stayed empty. The daemon must keep serving with the last good
    config and report the bad one."""
    proc = home.start()
    home.write_config("[handoff]\nat = 0\n")
    time.sleep(2.5)  # housekeeping checks the config every second

    assert proc.poll() is None, f"the daemon exited with {proc.returncode}:\n{home.log_tail()}"
    assert home.ping() is not None
    error = home.status_json()["config_error"]
    assert error is not None and "handoff" in error and str(home.config_file) in error, error
    # The last good settings (the defaults) still apply: the handoff is asked at 70 %.
    session = home.claude()
    session.assistant(700_000)
    out = home.hook_out(session.payload("Stop"))
    assert out is not None and out["systemMessage"].startswith("CONTEXT HANDOFF"), out
