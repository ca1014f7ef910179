"""Kafka requests per (api_key, api_version) in a capture, as Wireshark's dissector counts them.

An oracle independent of both the clients' logs and kinspect: if tshark, the client tally and
the capture agree, the capture holds exactly what the clients sent.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path


def kafka_requests(capture: Path, broker_port: int) -> Counter:
    port = str(broker_port)
    out = subprocess.run(
        ["tshark", "-n", "-r", str(capture), "-o", f"kafka.tcp.ports:{port}",
         "-Y", f"kafka && tcp.dstport == {port}", "-T", "fields",
         "-e", "kafka.api_key", "-e", "kafka.api_version"],
        capture_output=True, text=True, check=True).stdout
    counts = Counter()
    for line in out.splitlines():
        keys, versions = line.split("\t")
        # one TCP segment can complete several requests: tshark joins their fields with ","
        for key, version in zip(keys.split(","), versions.split(",")):
            counts[(int(key), int(version))] += 1
    return counts
