"""The C `default` for orjson against the Python one it stands in for."""

from __future__ import annotations

import pytest

from kinspect import native
from kinspect.render import jsonl
from tests.unit.native import needs_c

text_or = native.bytes_json.text_or if native.bytes_json is not None else None


def python_default(value):
    return jsonl._default(value)


@pytest.mark.parametrize("value", [
    b"", b"plain", "é ∑ 😀".encode(), b"\x00\x7f", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80",
    bytearray(b"ab"), bytearray(b"\xff"), memoryview(b"x"), {1, 2}, 7,
])
@needs_c
def test_same_as_python(value):
    assert text_or(python_default, value) == python_default(value)


@needs_c
def test_bytes_subclass_goes_to_the_fallback():
    class Tagged(bytes):
        pass
    seen = []
    assert text_or(lambda v: seen.append(v) or "fallback", Tagged(b"x")) == "fallback"
    assert seen == [b"x"]


@needs_c
def test_fallback_errors_propagate():
    def refuse(value):
        raise TypeError("not JSON")
    with pytest.raises(TypeError):
        text_or(refuse, object())


@needs_c
def test_dumpb_uses_it_and_matches_the_python_path():
    record = {"key": b"k", "value": b"\xff\x00", "headers": [{"key": "h", "value": b"v"}], "n": None}
    assert jsonl._fast_default is not jsonl._default
    assert jsonl.dumpb(record) == b'{"key":"k","value":{"b64":"/wA="},"headers":[{"key":"h","value":"v"}],"n":null}'


@needs_c
def test_every_record_key_and_value_of_real_captures():
    from kinspect.decode.pipeline import DecodeRun
    from tests.conftest import PCAPS

    seen = 0
    for name in ("librdkafka-produce-consume.pcapng", "librdkafka-mtu1500.pcap", "kafka39-legacy.pcap",
                 "java-transactions.pcap", "aiokafka-mtu1500.pcapng"):
        for record in DecodeRun(PCAPS / name).records():
            stack = [record]
            while stack:  # every bytes value anywhere in the exchange
                item = stack.pop()
                if isinstance(item, dict):
                    stack.extend(item.values())
                elif isinstance(item, list):
                    stack.extend(item)
                elif type(item) is bytes:
                    assert text_or(python_default, item) == python_default(item)
                    seen += 1
    assert seen > 700  # keys, values and header values of every record, some not UTF-8
