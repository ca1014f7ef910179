"""Control records: transaction markers and KRaft quorum records (key and value decoding).

Key: int16 version, int16 type. Values: ABORT/COMMIT carry EndTxnMarker (int16 version,
int32 coordinator epoch); the KRaft types carry a flexible-version message whose first field
is its own int16 Version. ``decode_control`` returns the decoded dict and a list of
complaints (text) the caller turns into Problems.
"""

from __future__ import annotations

import base64
import struct

ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = range(7)
CONTROL_TYPES = {
    ABORT: "ABORT", COMMIT: "COMMIT", LEADER_CHANGE: "LEADER_CHANGE",
    SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
    KRAFT_VERSION: "KRAFT_VERSION", KRAFT_VOTERS: "KRAFT_VOTERS",
}

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Malformed(Exception):
    pass


def decode_control(key: bytes | None, value: bytes | None) -> tuple[dict, list[str]]:
    complaints: list[str] = []
    if key is None or len(key) < 4:
        complaints.append(f"control record key must be at least 4 bytes, found "
                          f"{'null' if key is None else len(key)}")
        return {"type": "UNKNOWN"}, complaints
    key_version, type_id = _KEY.unpack_from(key, 0)
    control = {"type": CONTROL_TYPES.get(type_id, f"UNKNOWN({type_id})"), "key_version": key_version}
    if key_version < 0:
        complaints.append(f"control record key version {key_version} is negative")
    if type_id not in CONTROL_TYPES:
        complaints.append(f"unknown control record type {type_id}")
        return control, complaints
    if value is None:
        complaints.append(f"{control['type']} control record has a null value")
        return control, complaints
    try:
        _VALUE_DECODERS[type_id](_Reader(value), control)
    except _Malformed as e:
        complaints.append(f"{control['type']} control record value is malformed: {e}")
    return control, complaints


def _end_txn_marker(reader: _Reader, out: dict) -> None:
    version = out["version"] = reader.int16()
    if version < 0:
        raise _Malformed(f"EndTxnMarker version {version} is negative")
    out["coordinator_epoch"] = reader.int32()
    if version == 0:  # Kafka reads later versions as version 0 and ignores what follows
        reader.finish()


def _leader_change(reader: _Reader, out: dict) -> None:
    version = out["version"] = reader.int16()
    out["leader_id"] = reader.int32()
    out["voters"] = reader.array(lambda: _voter(reader, version))
    out["granting_voters"] = reader.array(lambda: _voter(reader, version))
    reader.tagged_fields()
    reader.finish()


def _voter(reader: _Reader, version: int) -> dict:
    voter = {"voter_id": reader.int32()}
    if version >= 1:
        voter["voter_directory_id"] = reader.uuid()
    reader.tagged_fields()
    return voter


def _snapshot_header(reader: _Reader, out: dict) -> None:
    out["version"] = reader.int16()
    out["last_contained_log_timestamp"] = reader.int64()
    reader.tagged_fields()
    reader.finish()


def _snapshot_footer(reader: _Reader, out: dict) -> None:
    out["version"] = reader.int16()
    reader.tagged_fields()
    reader.finish()


def _kraft_version(reader: _Reader, out: dict) -> None:
    out["version"] = reader.int16()
    out["kraft_version"] = reader.int16()
    reader.tagged_fields()
    reader.finish()


def _kraft_voters(reader: _Reader, out: dict) -> None:
    out["version"] = reader.int16()
    out["voters"] = reader.array(lambda: _kraft_voter(reader))
    reader.tagged_fields()
    reader.finish()


def _kraft_voter(reader: _Reader) -> dict:
    voter = {"voter_id": reader.int32(), "voter_directory_id": reader.uuid()}
    voter["endpoints"] = reader.array(lambda: _endpoint(reader))
    voter["kraft_version_feature"] = {"min_supported_version": reader.int16(),
                                      "max_supported_version": reader.int16()}
    reader.tagged_fields()  # KRaftVersionFeature's own
    reader.tagged_fields()
    return voter


def _endpoint(reader: _Reader) -> dict:
    endpoint = {"name": reader.string(), "host": reader.string(), "port": reader.uint16()}
    reader.tagged_fields()
    return endpoint


_VALUE_DECODERS = {
    ABORT: _end_txn_marker, COMMIT: _end_txn_marker, LEADER_CHANGE: _leader_change,
    SNAPSHOT_HEADER: _snapshot_header, SNAPSHOT_FOOTER: _snapshot_footer,
    KRAFT_VERSION: _kraft_version, KRAFT_VOTERS: _kraft_voters,
}


class _Reader:
    """Bounds-checked reader for the small flexible-version messages in control values."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> int:
        start = self.pos
        if n > len(self.data) - start:
            raise _Malformed(f"needs {n} bytes at value byte {start}, {len(self.data) - start} left")
        self.pos = start + n
        return start

    def int16(self) -> int:
        return _I16.unpack_from(self.data, self._take(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.data, self._take(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.data, self._take(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.data, self._take(8))[0]

    def uuid(self) -> str:
        start = self._take(16)
        return base64.urlsafe_b64encode(self.data[start:start + 16]).rstrip(b"=").decode()

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(5):
            byte = self.data[self._take(1)]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise _Malformed(f"unsigned varint longer than 5 bytes at value byte {self.pos - 5}")

    def string(self) -> str:
        length = self.uvarint() - 1
        if length < 0:
            raise _Malformed(f"null string at value byte {self.pos}")
        start = self._take(length)
        return self.data[start:start + length].decode("utf-8", "replace")

    def array(self, element) -> list:
        count = self.uvarint() - 1
        if count < 0:
            raise _Malformed(f"null array at value byte {self.pos}")
        if count > len(self.data) - self.pos:
            raise _Malformed(f"array of {count} elements cannot fit in "
                             f"{len(self.data) - self.pos} bytes")
        return [element() for _ in range(count)]

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise _Malformed(f"{len(self.data) - self.pos} bytes left over after the value")
