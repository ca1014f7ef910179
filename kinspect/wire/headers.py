"""Request and response headers.

Header versions are derived, never read (see apis.request_header_version): v0 has no client id,
v1 adds the nullable int16-length client id, v2 adds tagged fields (the client id keeps its int16
length). Response header v0 is the correlation id; v1 adds tagged fields.
"""

from __future__ import annotations

import struct

from kinspect.wire import apis

_REQ_FIXED = struct.Struct(">hhi")  # request_api_key, request_api_version, correlation_id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def read_uvarint(buf, pos: int, end: int) -> tuple[int, int] | None:
    """Unsigned varint at pos; None when it runs past end or over 5 bytes."""
    value = shift = 0
    while pos < end and shift <= 28:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    return None


def skip_tagged_fields(buf, pos: int, end: int) -> tuple[dict[int, bytes], int] | None:
    """Reads a tagged-field section; returns ({tag: raw bytes}, next position) or None if malformed."""
    got = read_uvarint(buf, pos, end)
    if got is None:
        return None
    count, pos = got
    tags: dict[int, bytes] = {}
    for _ in range(count):
        got = read_uvarint(buf, pos, end)
        if got is None:
            return None
        tag, pos = got
        got = read_uvarint(buf, pos, end)
        if got is None:
            return None
        size, pos = got
        if pos + size > end:
            return None
        tags[tag] = bytes(buf[pos:pos + size])
        pos += size
    return tags, pos


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "size", "tags")

    def __init__(self, api_key, api_version, correlation_id, client_id, size, tags=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.size = size  # header bytes; the body starts here
        self.tags = tags


def parse_request_header(frame, start: int = 0, end: int | None = None) -> RequestHeader | None:
    """Parses the request header of a frame payload (after the int32 size). None if it doesn't fit.

    For an API nobody told us about the header version is a guess (new APIs are flexible);
    if v2 doesn't fit, v1 is tried so that at least the correlation id and client id are kept.
    """
    if end is None:
        end = len(frame)
    if end - start < 8:
        return None
    api_key, api_version, correlation_id = _REQ_FIXED.unpack_from(frame, start)
    header_version = apis.request_header_version(api_key, api_version)
    header = _parse_rest(frame, start, end, api_key, api_version, correlation_id, header_version)
    if header is None and header_version == 2 and not apis.is_known(api_key, api_version):
        header = _parse_rest(frame, start, end, api_key, api_version, correlation_id, 1)
    return header


def _parse_rest(frame, start, end, api_key, api_version, correlation_id, header_version):
    pos = start + 8
    client_id = None
    if header_version >= 1:
        if end - pos < 2:
            return None
        (n,) = _I16.unpack_from(frame, pos)
        pos += 2
        if n >= 0:
            if pos + n > end:
                return None
            raw = bytes(frame[pos:pos + n])
            pos += n
            try:
                client_id = raw.decode("utf-8")
            except UnicodeDecodeError:
                client_id = raw.decode("latin-1")
        elif n != -1:
            return None
    tags = None
    if header_version >= 2:
        if pos < end and not frame[pos]:
            pos += 1  # no tagged fields, as nearly always
        else:
            got = skip_tagged_fields(frame, pos, end)
            if got is None:
                return None
            tags, pos = got
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos - start, tags or None)


def parse_response_header(frame, header_version: int, start: int = 0, end: int | None = None):
    """Returns (correlation_id, header size, tags) or None when it doesn't fit."""
    if end is None:
        end = len(frame)
    if end - start < 4:
        return None
    (correlation_id,) = _I32.unpack_from(frame, start)
    pos = start + 4
    tags = None
    if header_version >= 1:
        got = skip_tagged_fields(frame, pos, end)
        if got is None:
            return None
        tags, pos = got
    return correlation_id, pos - start, tags or None


def plausible_request(buf, pos: int, end: int, max_frame: int) -> bool | None:
    """Does a request frame start at buf[pos]? None: not enough bytes to tell.

    Used to find a frame boundary in a stream joined mid-way, after lost segments, and to detect
    Kafka on ports nobody told us about. Strict on purpose: a known key and version, a size that
    holds the header, a printable client id.
    """
    if end - pos < 14:
        return None
    (size,) = _I32.unpack_from(buf, pos)
    if size < 10 or size > max_frame:
        return False
    api_key, api_version, _ = _REQ_FIXED.unpack_from(buf, pos + 4)
    if not apis.is_known(api_key, api_version):
        return False
    if apis.request_header_version(api_key, api_version) == 0:
        return True
    (n,) = _I16.unpack_from(buf, pos + 12)
    if n == -1:
        return True
    if n < 0 or n > size - 10:
        return False
    have = min(end, pos + 14 + n)
    for b in buf[pos + 14:have]:
        if b < 0x20 or b == 0x7F:
            return False
    return True
