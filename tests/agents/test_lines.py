"""LineSplitter: bytes split anywhere give the file's lines, holding only the partial line."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxd.agents.lines import LineSplitter, count, decode, epoch_seconds

# Newlines made likely, so that lines are short and many.
_STREAM = st.binary(max_size=400).map(lambda b: b.replace(b"\x00", b"\n").replace(b"\x01", b"\n"))


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@given(_STREAM, st.lists(st.integers(min_value=0, max_value=400), max_size=20))
def test_any_split_gives_the_lines_of_the_whole(data: bytes, cuts: list[int]) -> None:
    splitter = LineSplitter()
    lines: list[bytes] = []
    for piece in _pieces(data, cuts):
        lines.extend(splitter.feed(piece))

    *complete, tail = data.split(b"\n")
    assert lines == complete
    # All it holds is the unterminated tail: memory is bounded by the current line.
    assert splitter.pending == len(tail)


def test_byte_by_byte_feeding_completes_each_line_once() -> None:
    splitter = LineSplitter()
    out = [line for byte in b'{"a":1}\n\n{"b":2}\n{"c"' for line in splitter.feed(bytes([byte]))]

    assert out == [b'{"a":1}', b"", b'{"b":2}']
    assert splitter.pending == 4


def test_overlong_line_is_dropped_whole_and_reading_goes_on() -> None:
    splitter = LineSplitter(max_line=10)

    assert splitter.feed(b"short\nxxxxxxxx") == [b"short"]
    assert splitter.feed(b"xxxxxxxx") == []  # over the cap: given up, nothing held
    assert splitter.pending == 0
    assert splitter.feed(b"xx\nnext\n") == [b"next"]


def test_reset_drops_the_partial_line() -> None:
    splitter = LineSplitter()
    splitter.feed(b"partial")

    splitter.reset()

    assert splitter.feed(b"line\n") == [b"line"]


@pytest.mark.parametrize("line", [b"", b"  ", b"{", b"\xff\xfe", b"[1]", b'"x"', b"null"])
def test_decode_returns_none_for_anything_but_an_object(line: bytes) -> None:
    assert decode(line) is None


def test_decode_returns_the_object() -> None:
    assert decode(b'{"type":"assistant"}\r') == {"type": "assistant"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-29T20:37:11.416Z", 1795984631.416),
        ("2026-11-29T20:37:11.416+00:00", 1795984631.416),
        ("2026-11-29T21:37:11.416+01:00", 1795984631.416),
        ("2026-11-29T20:37:11.416", 1795984631.416),  # no offset: UTC
        ("yesterday", None),
        (1795984631, None),
        (None, None),
    ],
)
def test_epoch_seconds(value: object, expected: float | None) -> None:
    assert epoch_seconds(value) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("value", "expected"), [(5, 5), (0, 0), (-1, None), (True, None), (2.0, None), ("3", None)]
)
def test_count_accepts_only_non_negative_ints(value: object, expected: int | None) -> None:
    assert count(value) == expected
