"""ctxd drives watchfiles' private Rust backend (`RustNotify`, what `awatch` wraps) directly, to
pace the watcher itself. This test pins the two signatures it relies on, so that a watchfiles
release that changes them fails here rather than at a user's daemon start."""

from __future__ import annotations

import inspect
from pathlib import Path

import anyio
from watchfiles._rust_notify import RustNotify

from ctxd.daemon import watcher, watches


def test_rust_notify_takes_the_arguments_ctxd_passes() -> None:
    assert list(inspect.signature(RustNotify).parameters) == [
        "watch_paths",
        "debug",
        "force_polling",
        "poll_delay_ms",
        "recursive",
        "ignore_permission_denied",
    ]
    assert getattr(RustNotify.watch, "__text_signature__", None) == (
        "($self, debounce_ms, step_ms, timeout_ms, stop_event)"
    )


def test_the_seam_opens_a_watcher_that_reports_a_new_transcript(tmp_path: Path) -> None:
    with watcher.open_notify([tmp_path]) as notify:
        (tmp_path / "s.jsonl").write_text("{}\n")
        changes = notify.watch(50, 10, 2000, None)
    assert isinstance(changes, set)
    assert any(path.endswith("s.jsonl") for _, path in changes)


def test_what_the_seam_watches_is_measured(tmp_path: Path) -> None:
    # ctxd counts the watches the kernel holds (/proc/self/fdinfo): below the limit, every
    # folder under the roots is one of them.
    for name in ("a", "b/c", "b/d/e"):
        (tmp_path / name).mkdir(parents=True)
    folders = watches.find_folders([tmp_path])
    assert len(folders) == 6
    with watcher.open_notify([tmp_path]):
        coverage = watches.measure(folders)
    assert coverage.measured
    assert (coverage.folders, coverage.watched, coverage.unwatched) == (6, 6, ())
    anyio.run(watcher.wait_released)
    assert watches.measure(folders).watched == 0, "once closed, nothing is watched"
