"""Framing: detected from headers first, then the first bytes; never assumed."""

from __future__ import annotations

import pytest

from kinspect.schemas.framing import Frame, FramingError, detect, message_indexes


def test_confluent_v0_in_the_payload():
    assert detect(b"\x00\x00\x00\x00\x07abc") == Frame(7, None, 5, "payload", None, 5)


def test_short_or_unmarked_values_are_not_framed():
    assert detect(b"\x00\x00\x00\x07") is None       # 4 bytes: an int32 key, not a frame
    assert detect(b"hello world") is None
    assert detect(None) is None
    assert detect(b"\x01" + b"\x00" * 10) is None   # V1 needs 16 bytes of GUID


def test_confluent_v1_guid_in_the_payload():
    guid = bytes(range(16))
    frame = detect(b"\x01" + guid + b"data")
    assert (frame.id, frame.guid, frame.start) == (None, guid, 17)


def test_the_header_wins_and_leaves_the_payload_bare():
    guid = bytes(range(16))
    headers = [{"key": "__value_schema_id", "value": b"\x01" + guid + b"\x02\x02"}]
    frame = detect(b"\x00\x00\x00\x00\x09xyz", headers, is_key=False)
    assert (frame.guid, frame.start, frame.where, frame.index_at) == (
        guid, 0, "header __value_schema_id", 17)
    assert message_indexes(frame.header, frame.index_at) == ([1], 19)
    # a key looks at __key_schema_id only
    assert detect(b"plain", headers, is_key=True) is None
    v0 = [{"key": "__key_schema_id", "value": b"\x00\x00\x00\x00\x05"}]
    assert detect(b"payload", v0, is_key=True).id == 5


def test_the_last_header_of_a_name_counts_as_kafkas_lastheader():
    headers = [("__value_schema_id", b"\x00\x00\x00\x00\x01"), ("__value_schema_id", b"\x00\x00\x00\x00\x02")]
    assert detect(b"x", headers).id == 2


def test_apicurio_content_and_global_ids_in_headers():
    headers = [{"key": "apicurio.value.globalId", "value": (77).to_bytes(8, "big")}]
    frame = detect(b"payload", headers)
    assert (frame.id, frame.start, frame.where) == (77, 0, "header apicurio.value.globalId")
    headers.append({"key": "apicurio.value.contentId", "value": (12).to_bytes(8, "big")})
    assert detect(b"payload", headers).id == 12  # the content id is the Confluent-compatible id
    assert detect(b"payload", [{"key": "apicurio.value.contentId", "value": b"\x00\x01"}]) is None


@pytest.mark.parametrize("data, indexes", [
    (b"\x00", [0]),                # count 0 is [0]
    (b"\x02\x00", [0]),            # count 1, index 0
    (b"\x04\x02\x04", [1, 2]),     # count 2: [1, 2]
])
def test_message_indexes(data, indexes):
    assert message_indexes(data, 0) == (indexes, len(data))


@pytest.mark.parametrize("data, what", [
    (b"", "cut off"),
    (b"\x80\x80", "cut off"),
    (b"\x01", "count -1"),
    (b"\xfe\x01", "count 127"),
    (b"\x02\x01", "negative message index"),
    (b"\x04\x02", "cut off"),
])
def test_bad_message_indexes_say_where(data, what):
    with pytest.raises(FramingError, match=what) as caught:
        message_indexes(data, 0)
    assert 0 <= caught.value.offset <= len(data)
