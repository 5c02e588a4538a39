"""`ctxd status --json` writes the status document byte for byte as it always has (orjson's
bytes), though it encodes with the stdlib's json whenever that gives the same bytes: a truth
table over what a document holds, floats of every size included."""

from __future__ import annotations

import math

import orjson
import pytest

from ctxd.cli.status import document_json

FLOATS = [
    0.0,
    -0.0,
    1.0,
    5.9,
    65.0,
    1e-4,
    -1e-4,
    0.00011,
    9.99e-5,  # orjson `0.0000999`, the stdlib `9.99e-05`
    1e-5,
    2.5e-7,
    5e-324,
    123456.789,
    1796553418.1495714,
    1e15,
    1e16,
    1.5e300,
    math.inf,
    -math.inf,
    math.nan,
]


@pytest.mark.parametrize("value", FLOATS, ids=repr)
def test_a_float_anywhere_is_written_as_orjson_writes_it(value: float) -> None:
    doc = {"schema": "ctxd.status/v1", "sessions": [{"used_pct": value, "nested": [[value]]}]}
    assert document_json(doc) == orjson.dumps(doc)


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "",
        'quote " and backslash \\',
        "\n\r\t\b\f\x00\x01\x1f\x7f",
        "é ü ß ▓░ — “curly” 中文 \u2028\u2029 \U0001f600",
        "</script>",
    ],
)
def test_a_string_is_written_as_orjson_writes_it(text: str) -> None:
    doc = {text: [text, {"k": text}], "daemon": {"socket": text}}
    assert document_json(doc) == orjson.dumps(doc)


def test_the_other_json_values_are_written_as_orjson_writes_them() -> None:
    doc = {
        "sessions": [],
        "learned_windows": {"model-a": 200_000, "model-b": -1},
        "big": 2**63 - 1,
        "small": -(2**63),
        "flags": [True, False, None],
        "empty": {"a": {}, "b": []},
    }
    assert document_json(doc) == orjson.dumps(doc)
