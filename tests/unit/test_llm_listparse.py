"""`string_array`: every example of docs/llm-requests.md#list-parsing and the edges around them."""

import pytest

from overbrainer.llm.listparse import string_array


@pytest.mark.parametrize(
    "text, expected",
    [
        ('["a", "b"]', ["a", "b"]),
        ('Here are [3] questions: ["a"]', ["a"]),
        ('["a","b","cut', ["a", "b"]),
        ('{"items":["a"]}', ["a"]),
        ('["line\\nbreak", "quote \\" and \\u00e9"]', ["line\nbreak", 'quote " and \u00e9']),
        ("[1, 2]", None),
        ('"I cannot help"', None),
        ("I cannot help", None),
        ("", None),
        ('```json\n[\n  "first",\n  "second"\n]\n```', ["first", "second"]),
        ('["  padded  ", "", "   ", "x"]', ["padded", "x"]),
        ('["a", 3, "b"]', ["a"]),
        ('[]  then ["later"]', ["later"]),
        ('["", " "] then ["real"]', ["real"]),
        ('["a" "b",,"c"]', ["a", "b", "c"]),
        ('["bad \\q escape", "x"]', None),
    ],
)
def test_arrays(text, expected):
    assert string_array(text) == expected


def test_truncated_first_string_falls_through_to_next_array():
    assert string_array('["cut off here and then ["x"]') == ["cut off here and then ["]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1. first\n2) second\n3.third", ["first", "second", "third"]),
        ("- dash\n* star\n\u2022 dot", ["dash", "star", "dot"]),
        ("Intro line\n- one\n\n- two\nOutro", ["one", "two"]),
        ("-nospace\n*nospace", None),
        ("1.5 is a number", None),
        ("-  \n- kept", ["kept"]),
    ],
)
def test_bullets(text, expected):
    assert string_array(text) == expected


def test_array_wins_over_bullets():
    assert string_array('- one\n- two\n["three"]') == ["three"]
