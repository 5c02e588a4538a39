"""/metrics tells how many of the agents' folders are watched and how many are polled: past the
inotify limit, figures lag by the poll interval, and an alert on the count is how a user
learns it without reading the log."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ctxd.daemon.metrics import render


def samples(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_watched_and_polled_folders_are_gauges() -> None:
    doc = {"sessions": [], "daemon": {"watching": {"watched": 12, "unwatched": 22}}}
    found = samples(render(doc))
    assert (found["ctxd_watched_folders"], found["ctxd_unwatched_folders"]) == (12, 22)


def test_a_daemon_that_says_nothing_of_watching_gets_no_such_gauge() -> None:
    for watching in (None, "garbage", {"watched": "12", "unwatched": True}):
        found = samples(render({"sessions": [], "daemon": {"watching": watching}}))
        assert "ctxd_watched_folders" not in found
        assert "ctxd_unwatched_folders" not in found
