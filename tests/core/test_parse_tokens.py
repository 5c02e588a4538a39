"""A number of tokens as a person writes it, in the forms ctxd prints (`725k`, `1M`)."""

from __future__ import annotations

import re

import pytest

from ctxd.core.measure import parse_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("200000", 200_000),
        ("200_000", 200_000),
        ("200,000", 200_000),
        ("200k", 200_000),
        ("200K", 200_000),
        ("725k", 725_000),
        ("1M", 1_000_000),
        ("1m", 1_000_000),
        ("1.5M", 1_500_000),
        (" 1M ", 1_000_000),
    ],
)
def test_accepted(text: str, tokens: int) -> None:
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("lots", "not a number of tokens: 'lots' (e.g. 200000, 200k, 1M)"),
        ("k", "not a number of tokens"),
        ("", "not a number of tokens"),
        ("1.5", "not a number of tokens"),  # a fraction of a token
        ("nank", "not a number of tokens"),
        ("1e400k", "not a number of tokens"),  # infinite
        ("0", "must be a positive number of tokens, got 0"),
        ("-1k", "must be a positive number of tokens, got -1k"),
    ],
)
def test_refused(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_tokens(text)
