"""tshark as an oracle: the Kafka request headers it dissects from a capture."""

from __future__ import annotations

import subprocess
from collections import Counter

FIELDS = ("frame.number", "kafka.api_key", "kafka.api_version", "kafka.correlation_id", "kafka.client_id")


def tshark_requests(tshark: str, capture, ports) -> Counter:
    """Counter of (api_key, api_version, correlation_id, client_id) for every request tshark dissects."""
    cmd = [tshark, "-n", "-r", str(capture), "-Y", "kafka", "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", "aggregator=\x1f"]
    for port in sorted(ports):
        cmd += ["-d", f"tcp.port=={port},kafka"]
    for field in FIELDS:
        cmd += ["-e", field]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found: Counter = Counter()
    for line in text.splitlines():
        _, keys, versions, correlations, clients = (line.split("\t") + [""] * 5)[:5]
        if not versions:
            continue  # a response: tshark gives it no api_version
        keys, versions, correlations = keys.split("\x1f"), versions.split("\x1f"), correlations.split("\x1f")
        clients = clients.split("\x1f") if clients else []
        # A frame may hold several PDUs; requests have an api_version, responses don't.
        for i, version in enumerate(versions):
            client = clients[i] if i < len(clients) else None
            found[(int(keys[i]), int(version), int(correlations[i]), client or None)] += 1
    return found


def kinspect_requests(records) -> Counter:
    return Counter((r["api_key"], r["api_version"], r["correlation_id"], r["client_id"] or None)
                   for r in records if r.get("type") == "exchange")
