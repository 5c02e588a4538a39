"""The dashboard's history, as JSON from each series' kept bytes, is the history encoded whole."""

from __future__ import annotations

import orjson

from ctxd.daemon.history import History


def test_the_historys_json_follows_points_added_dropped_and_sessions_gone() -> None:
    history = History(points=3)
    assert history.encoded() == orjson.dumps(history.export()) == b"{}"
    history.record([("a", 1.0, 5, 0), ("b", 1.0, 6, 0), ("c", 1.0, None, 0)])
    assert history.encoded() == orjson.dumps(history.export())
    for at in range(2, 8):  # "a" moves every time: past 3 points the oldest go
        history.record([("a", float(at), 5 + at, 0), ("b", float(at), 6, 0)])
        assert history.encoded() == orjson.dumps(history.export())
    history.record([("b", 9.0, 6, 1)])  # "a" is gone; "b" compacted
    assert history.encoded() == orjson.dumps(history.export())
    assert orjson.loads(history.encoded()) == {"b": [[1.0, 6, 0], [9.0, 6, 1]]}
