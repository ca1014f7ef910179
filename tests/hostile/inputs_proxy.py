"""Generators of hostile captures for the proxy's classes (issue 30, item 6), as decode sees them.

The proxy's decoder reads what the proxy relays, through the same pipeline as decode; a capture
of the same bytes puts that decoder under the same load, where the hostile bench can time it.
- ``metadata_brokers_pcap_gz``: one connection on port 9092: a Metadata v12 request and its
  response naming 100,000 brokers (2.9 MB), then DescribeCluster and FindCoordinator v4 responses
  naming as many: hosts with terminal escapes, bytes that are not UTF-8, one of 30,000
  characters, ports 0, -1, 65,535 and 70,000, node ids negative and 2^31-1. What the proxy
  bounds with --max-brokers, the decoder must show within the hostile bounds (20 s, 1 GiB).

    python -c "from tests.hostile.inputs_proxy import metadata_brokers_pcap_gz as g; print(g(__import__('pathlib').Path('/tmp')))"
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import encode_body, encode_request
from tests.hostile.packets import Connection, PcapWriter

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 3, 10, 60
PCAP_HEADER = struct.Struct("<IHHiIII")


def _response(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    payload = struct.pack(">i", correlation_id) + (b"\x00" if response_header_version(api_key, api_version) else b"")
    payload += encode_body(api_key, api_version, "response", body)
    return struct.pack(">i", len(payload)) + payload


def _address(i: int) -> tuple[int, object, int]:
    """Broker i's node id, host (str or bytes) and port: most plain, every kind of hostile one."""
    node = -1 - i if i % 97 == 5 else (2**31 - 1 - i if i % 89 == 3 else i)
    if i % 10 == 1:
        host: object = f"\x1b[31mb{i}\x1b]0;owned\x07.example"  # a colour and a terminal title
    elif i % 10 == 2:
        host = b"\xff\xfeb%d\xc3" % i  # not UTF-8
    elif i == 7:
        host = "h" * 30_000
    else:
        host = f"b{i}.kafka.example"
    port = (0, -1, 65535, 70000)[i % 4] if i % 13 == 0 else 9092
    return node, host, port


def metadata_brokers_pcap_gz(root: Path, brokers: int = 100_000) -> Path:
    path = Path(root) / "metadata-brokers.pcap.gz"
    entries = [_address(i) for i in range(brokers)]
    exchanges = [
        (encode_request(METADATA, 12, 1, "hostile", {"topics": None, "allow_auto_topic_creation": False}),
         _response(METADATA, 12, 1, {"cluster_id": "c", "controller_id": 0, "topics": [], "brokers": [
             {"node_id": n, "host": h, "port": p, "rack": None} for n, h, p in entries]})),
        (encode_request(DESCRIBE_CLUSTER, 0, 2, "hostile", {"include_cluster_authorized_operations": False}),
         _response(DESCRIBE_CLUSTER, 0, 2, {"cluster_id": "c", "controller_id": 0, "brokers": [
             {"broker_id": n, "host": h, "port": p, "rack": None} for n, h, p in entries]})),
        (encode_request(FIND_COORDINATOR, 4, 3, "hostile", {"key_type": 0, "coordinator_keys": ["g"]}),
         _response(FIND_COORDINATOR, 4, 3, {"coordinators": [
             {"key": f"g{i}", "node_id": n, "host": h, "port": p, "error_code": 0}
             for i, (n, h, p) in enumerate(entries)]})),
    ]
    out = PcapWriter(path)
    out.file.close()
    out.file = gzip.open(path, "wb", compresslevel=6)
    out.file.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    with out:
        conn = Connection(out)
        conn.handshake()
        for request, response in exchanges:
            conn.send(request)
            conn.reply(response)
        conn.close()
    return path
