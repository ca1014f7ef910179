"""Generators of hostile inputs for kinspect report (issue 35): names that are long and hostile
in HTML, in numbers past every cap of the page.

``long_hostile_names(root, count=4_000)`` writes ``report-names.pcap`` (131 MB at the default
count): on one connection, ``count`` Metadata v12 exchanges, each from a client id of its own
32,000 characters long that opens with ``</title><script>``, asking for a topic of its own named
with ``</script>`` and quotes (249 characters), answered UNKNOWN_TOPIC_OR_PARTITION, at
one-second steps so the timeline's buckets widen past 240. Every client id is a client row, every
(API, error, topic) a summary error row. Run

    kinspect report PATH -o OUT.html

Bound: within 20 s and 1 GiB, exit 0, and OUT.html at most 8 MiB (the README's page-size bound;
the client table shows 1,000 rows of ids cut at 1,200 characters, the error table 1,000 rows).
"""

from __future__ import annotations

from pathlib import Path

from tests.hostile.kafka import request, response
from tests.hostile.packets import Connection, PcapWriter

METADATA = 3
SEGMENT = 60_000
ZERO_UUID = bytes(16)  # no topic id: the name is asked for
CLIENT_ID_LENGTH = 32_000


def long_hostile_names(root: Path, count: int = 4_000) -> Path:
    path = root / "report-names.pcap"
    with PcapWriter(path) as out:
        conn = Connection(out)
        conn.handshake()
        for i in range(count):
            client_id = f"</title><script>alert({i})</script>{i:08d}".ljust(CLIENT_ID_LENGTH, "\x1b")
            topic = f"</script><b>'\"{i:08d}".ljust(249, "<")
            conn.send(request(METADATA, 12, i, {"topics": [{"topic_id": ZERO_UUID, "name": topic}],
                                                "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False}, client_id),
                      mss=SEGMENT)
            conn.reply(response(METADATA, 12, i, {"throttle_time_ms": 0, "brokers": [], "cluster_id": None,
                                                  "controller_id": -1, "topics": [
                                                      {"error_code": 3, "name": topic, "topic_id": ZERO_UUID,
                                                       "is_internal": False, "partitions": [],
                                                       "topic_authorized_operations": -2147483648}]}),
                       mss=SEGMENT)
            out.micros += 1_000_000  # a second between exchanges
        conn.close()
    return path
