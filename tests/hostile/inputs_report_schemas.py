"""Hostile inputs for the report's table of values by schema (issues 33 and 35): subject names
that are HTML, a terminal's escapes and quotes, learnt from the capture's own `_schemas` records.

``html_subjects(root, count=3)`` writes ``report-subjects.pcap``: on one connection, a Produce
to `_schemas` registering ``count`` Avro "long" schemas (ids 1..count), each under a subject of
its own that opens with ``</td><script>`` (about 2,000 characters with quotes and escapes);
then a Produce to topic ``t`` of, for each id, one value that decodes and one whose payload is
cut short (a varint that never ends), and one value framed with id count + 1, known to none.
Every (API, side, schema) is a row of the table: 2 × (count + 1) rows. Run

    kinspect report PATH -o OUT.html
    kinspect decode --summary PATH

Bound (count=20,000): within 20 s and 1 GiB, exit 0; OUT.html at most 8 MiB (the table shows
1,000 rows, each subject cut at 300 characters), no markup from a subject in the page.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from tests.hostile.kafka import batch, produce, produce_response, record
from tests.hostile.packets import Connection, PcapWriter

SUBJECT_LENGTH = 2_000
PER_BATCH = 5_000


def subject(i: int) -> str:
    return f"</td><script>alert({i})</script>\"'&\x1b[31m{i:06d}".ljust(SUBJECT_LENGTH, "<")


def _register(i: int) -> tuple[bytes, bytes]:
    key = {"keytype": "SCHEMA", "subject": subject(i), "version": 1, "magic": 1}
    value = {"subject": subject(i), "version": 1, "id": i, "schema": json.dumps({"type": "long", "n": i}),
             "deleted": False}
    return json.dumps(key).encode(), json.dumps(value).encode()


def _framed(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def _batches(pairs: list[tuple]) -> bytes:
    """(key, value) pairs as batches of PER_BATCH records, offsets in order."""
    out = []
    for at in range(0, len(pairs), PER_BATCH):
        chunk = pairs[at:at + PER_BATCH]
        out.append(batch(b"".join(record(k, v, offset_delta=n) for n, (k, v) in enumerate(chunk)), len(chunk),
                         base_offset=at))
    return b"".join(out)


def html_subjects(root: Path, count: int = 3) -> Path:
    path = Path(root) / "report-subjects.pcap"
    registered = _batches([_register(i) for i in range(1, count + 1)])
    values = []
    for i in range(1, count + 1):
        values.append((None, _framed(i, bytes([2 * (i % 60)]))))  # zig-zag: decodes as i % 60
        values.append((None, _framed(i, b"\xff")))                 # a varint cut short
    values.append((None, _framed(count + 1, b"\x02")))
    with PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        conn.send(produce(9, 1, {0: registered}, topic="_schemas"))
        conn.reply(produce_response(9, 1, topic="_schemas"))
        out.micros += 1_000_000
        conn.send(produce(9, 2, {0: _batches(values)}, topic="t"))
        conn.reply(produce_response(9, 2, topic="t"))
        conn.close()
    return path
