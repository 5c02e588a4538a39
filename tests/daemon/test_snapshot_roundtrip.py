"""Property: whatever state the daemon holds, a restart gives it back equal, through the
snapshot and through the journal, every field of every state.

The states are built from the dataclasses' own field types (`strategy_for`), so a field added
tomorrow is covered without a line here, and a field of a type this test cannot build fails it
rather than going untested. "Every field set": an optional field holds a value, not its None,
which is where a nested state (Claude Code's prompt cache) used to come back as a plain dict.
"""

from __future__ import annotations

import dataclasses
import enum
import tempfile
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.core.session import SessionState
from ctxd.daemon import snapshot
from ctxd.daemon.centre import Centre

#: What JSON (and orjson) can hold exactly: 64-bit integers, finite floats, text without lone
#: surrogates. The states hold nothing else (they come from JSON themselves).
INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    bool: st.booleans(),
    int: INTS,
    float: FLOATS,
    str: TEXT,
}


def strategy_for(tp: Any, every_field_set: bool) -> st.SearchStrategy[Any]:
    """Values of the type `tp` declares; TypeError for a type nobody taught this test."""
    if tp in SCALARS:
        return SCALARS[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return st.sampled_from(list(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        kwargs = {
            f.name: strategy_for(hints[f.name], every_field_set) for f in fields(tp) if f.init
        }
        return st.builds(tp, **kwargs)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        present = [strategy_for(a, every_field_set) for a in args if a is not type(None)]
        if type(None) in args and not every_field_set:
            present.append(st.none())
        return st.one_of(present)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for(args[0], every_field_set), max_size=4).map(tuple)
    if origin is tuple and args:
        return st.tuples(*(strategy_for(a, every_field_set) for a in args))
    raise TypeError(f"no strategy for {tp!r}: teach strategy_for this type")


def sessions(every_field_set: bool) -> st.SearchStrategy[list[SessionState]]:
    one = strategy_for(SessionState, every_field_set)
    return st.lists(one, max_size=4, unique_by=lambda s: s.key)


#: Model key -> a window (the windows learned, the contexts proved).
WINDOWS = st.dictionaries(TEXT, st.integers(min_value=0, max_value=2**63 - 1), max_size=3)
ENDED = st.dictionaries(
    TEXT,
    st.tuples(st.tuples(INTS, INTS), st.integers(min_value=0, max_value=2**63 - 1)),
    max_size=3,
)


def open_centre(home: Path) -> Centre:
    return Centre.open({"HOME": str(home)}, {})


def save(centre: Centre, path: Path, journal_seq: int = 0) -> None:
    """`snapshot.save`'s document, written without its two fsyncs: the property is about what
    is written, and a failure's shrinking runs thousands of examples."""
    path.write_bytes(snapshot.snapshot(centre.sessions, centre.transcripts, journal_seq))


@pytest.mark.parametrize("every_field_set", [True, False], ids=["every-field-set", "any"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_restart_gives_back_every_session_window_and_ended_file_equal(
    every_field_set: bool, data: st.DataObject
) -> None:
    states = data.draw(sessions(every_field_set))
    learned, proved = data.draw(WINDOWS), data.draw(WINDOWS)
    ended = data.draw(ENDED)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        state_dir = root / "state"
        state_dir.mkdir(mode=0o700)
        before = open_centre(root)
        before.sessions.restore(states, learned, proved)
        for path, (identity, size) in ended.items():
            before.transcripts.ended.remember(path, identity, size)
        save(before, state_dir / "state.json")

        after = open_centre(root)
        count = snapshot.restore(after.sessions, after.transcripts, state_dir / "state.json")
    assert count == len(states)
    assert {s.key: s for s in after.sessions} == {s.key: s for s in states}
    assert after.sessions.learned == learned
    assert after.sessions.proved == proved
    assert after.transcripts.ended.export() == before.transcripts.ended.export()
    for state in after.sessions:
        hash(state)  # states are hashed (tuples, not lists, all the way down)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=sessions(every_field_set=True), later=sessions(every_field_set=True))
def test_a_journal_line_gives_back_its_session_equal(
    first: list[SessionState], later: list[SessionState]
) -> None:
    """The journal's lines are the answers given since the snapshot: a crash right after one
    restores exactly the session it was written for."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        state_dir = root / "state"
        state_dir.mkdir(mode=0o700)
        before = open_centre(root)
        before.sessions.restore(first, {})
        journal = snapshot.Journal(state_dir / "state.journal")
        journal.start()
        save(before, state_dir / "state.json", journal.seq)
        for state in later:
            journal.append(state, None)
        journal.close()

        after = open_centre(root)
        reopened = snapshot.Journal(state_dir / "state.journal")
        snapshot.restore(after.sessions, after.transcripts, state_dir / "state.json", reopened)
    want = {s.key: s for s in first} | {s.key: s for s in later}
    assert {s.key: s for s in after.sessions} == want


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("prompt_cache", {"ttl": "1h", "warm": True}),  # a statusline's words, not a state's
        ("tokens", "120000"),
        ("agent_config", [["CLAUDE_CONFIG_DIR"]]),
        ("estimated", 1),
    ],
)
def test_a_saved_session_of_the_wrong_shape_is_skipped_and_the_others_come_back(
    tmp_path: Path, field: str, value: Any
) -> None:
    """A snapshot written by other code (or damaged) never gives a session back broken, to fail
    at its next hook: that one is skipped, with a warning, and every other one restored."""
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    good = SessionState(key="claude:good", agent="claude", session_id="good", tokens=5)
    bad = {**orjson.loads(orjson.dumps(good)), "key": "claude:bad", "session_id": "bad"}
    bad[field] = value
    doc = {"format": snapshot.FORMAT, "sessions": [orjson.loads(orjson.dumps(good)), bad]}
    (state_dir / "state.json").write_bytes(orjson.dumps(doc))
    centre = open_centre(tmp_path)
    assert snapshot.restore(centre.sessions, centre.transcripts, state_dir / "state.json") == 1
    assert list(centre.sessions) == [good]
