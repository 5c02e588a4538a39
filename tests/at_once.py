"""A call that must answer at once: what the tests of reading files ctxd does not own share, so
that a read that would wait forever (a FIFO's open, /dev/zero) fails the test instead of hanging
the run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["within_a_second"]

T = TypeVar("T")


def within_a_second(call: Callable[[], T]) -> T:
    """`call()`'s result (or exception); it must come within a second, not hang the run."""
    outcome: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(1.0)
    assert not thread.is_alive(), "it hung"
    if failed:
        raise failed[0]
    return outcome[0]
