"""Where a record's key or value says which schema wrote it: detected, never assumed.

Confluent's wire format (confluent_kafka/schema_registry/common/serde.py, SchemaId):
- V0 in the payload: 0x00, a 4-byte big-endian schema id, then the data;
- V1 in the payload: 0x01 and a 16-byte GUID (the MD5 of the schema, registry.guid_of);
- the id in a record header, ``__key_schema_id`` or ``__value_schema_id``, holding the V0 or V1
  bytes above, the payload bare.
For Protobuf the id is followed by the message-index list (zig-zag varints: a count, then the
indexes; a count of 0 means [0]); in the header form the list follows the id in the header.

Apicurio's serdes carry the id in headers, ``apicurio.{key,value}.contentId`` or ``.globalId``,
8 bytes big-endian, the payload bare (serdes/kafka/serde-kafka-common/.../DefaultHeadersHandler
.java); a contentId is what its Confluent-compatible API calls a schema id. Its payload form
(0x00 and a 4-byte content id, Default4ByteIdHandler) is Confluent's V0.

A Frame says where the id is and where the data starts; whether a V0/V1-looking payload really is
framed is decided by the caller, which knows which ids exist. Sans-I/O, no allocation beyond the
Frame.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC_V0, MAGIC_V1 = 0, 1
CONFLUENT_HEADERS = {False: "__value_schema_id", True: "__key_schema_id"}
APICURIO_HEADERS = {False: ("apicurio.value.contentId", "apicurio.value.globalId"),
                    True: ("apicurio.key.contentId", "apicurio.key.globalId")}
MAX_INDEXES = 64  # nesting of Protobuf messages a message-index list may name


@dataclass(frozen=True, slots=True)
class Frame:
    id: int | None            # a registry id (V0, Apicurio), or None with a guid
    guid: bytes | None        # V1: the 16 bytes
    start: int                # where the data starts in the payload (after the id, before indexes)
    where: str                # "payload", "header __value_schema_id", "header apicurio.value.contentId"
    header: bytes | None = None  # the header's bytes, when the id came from a header
    index_at: int = 0         # where a Protobuf message-index list starts, in header or payload


class FramingError(ValueError):
    """A message-index list that does not read; .offset is where, in the bytes it was read from."""

    def __init__(self, what: str, offset: int):
        super().__init__(what)
        self.offset = offset


def _header(headers, name: str):
    """The last header of that name (as Kafka's lastHeader), or None."""
    found = None
    for header in headers or ():
        key = header.get("key") if isinstance(header, dict) else header[0]
        if key == name or (isinstance(key, (bytes, bytearray)) and key == name.encode()):
            found = header.get("value") if isinstance(header, dict) else header[1]
    return found


def detect(value, headers=None, is_key: bool = False) -> Frame | None:
    """The frame of a key or value, from its headers first, then its first bytes; None when
    nothing says a schema wrote it (a value of fewer than 5 bytes, or not starting 0x00/0x01)."""
    if headers:
        frame = _from_headers(headers, is_key)
        if frame is not None:
            return frame
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) < 5:
        return None
    magic = value[0]
    if magic == MAGIC_V0:
        return Frame(int.from_bytes(value[1:5], "big"), None, 5, "payload", None, 5)
    if magic == MAGIC_V1 and len(value) >= 17:
        return Frame(None, bytes(value[1:17]), 17, "payload", None, 17)
    return None


def _from_headers(headers, is_key: bool) -> Frame | None:
    name = CONFLUENT_HEADERS[is_key]
    raw = _header(headers, name)
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw)
        if len(raw) >= 5 and raw[0] == MAGIC_V0:
            return Frame(int.from_bytes(raw[1:5], "big"), None, 0, f"header {name}", raw, 5)
        if len(raw) >= 17 and raw[0] == MAGIC_V1:
            return Frame(None, raw[1:17], 0, f"header {name}", raw, 17)
    for name in APICURIO_HEADERS[is_key]:
        raw = _header(headers, name)
        if isinstance(raw, (bytes, bytearray)) and len(raw) == 8:
            return Frame(int.from_bytes(raw, "big"), None, 0, f"header {name}", None, 0)
    return None


def varint(data, pos: int) -> tuple[int, int]:
    """A zig-zag varint of at most 10 bytes at pos: (value, next position)."""
    result = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        byte = data[i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), i + 1
        shift += 7
    raise FramingError("message-index varint cut off or longer than 10 bytes", pos)


def message_indexes(data, pos: int) -> tuple[list[int], int]:
    """A Protobuf message-index list at pos: (indexes, next position). A count of 0 is [0]."""
    count, pos = varint(data, pos)
    if count == 0:
        return [0], pos
    if not 0 < count <= MAX_INDEXES:
        raise FramingError(f"message-index count {count} (at most {MAX_INDEXES})", pos - 1)
    indexes = []
    for _ in range(count):
        at = pos
        index, pos = varint(data, pos)
        if index < 0:
            raise FramingError(f"negative message index {index}", at)
        indexes.append(index)
    return indexes, pos
