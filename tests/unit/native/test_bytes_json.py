"""The C `default` for orjson against the Python one it stands in for."""

from __future__ import annotations

import pytest

from kinspect import native
from kinspect.render import jsonl

text_or = native.bytes_json.text_or if native.bytes_json is not None else None


def python_default(value):
    return jsonl._default(value)


@pytest.mark.parametrize("value", [
    b"", b"plain", "é ∑ 😀".encode(), b"\x00\x7f", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80",
    bytearray(b"ab"), bytearray(b"\xff"), memoryview(b"x"), {1, 2}, 7,
])
def test_same_as_python(value):
    assert text_or(python_default, value) == python_default(value)


def test_bytes_subclass_goes_to_the_fallback():
    class Tagged(bytes):
        pass
    seen = []
    assert text_or(lambda v: seen.append(v) or "fallback", Tagged(b"x")) == "fallback"
    assert seen == [b"x"]


def test_fallback_errors_propagate():
    def refuse(value):
        raise TypeError("not JSON")
    with pytest.raises(TypeError):
        text_or(refuse, object())


def test_dumpb_uses_it_and_matches_the_python_path():
    record = {"key": b"k", "value": b"\xff\x00", "headers": [{"key": "h", "value": b"v"}], "n": None}
    assert jsonl._fast_default is not jsonl._default
    assert jsonl.dumpb(record) == b'{"key":"k","value":{"b64":"/wA="},"headers":[{"key":"h","value":"v"}],"n":null}'
