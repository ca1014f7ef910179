"""tshark as an oracle: the Kafka request headers it dissects from a capture."""

from __future__ import annotations

import subprocess
from collections import Counter

FIELDS = ("frame.number", "kafka.api_key", "kafka.api_version", "kafka.correlation_id", "kafka.client_id")


def tshark_requests(tshark: str, capture, ports) -> Counter:
    """Counter of (api_key, api_version, correlation_id, client_id) for every request tshark dissects."""
    text = _fields(tshark, capture, ports, FIELDS, "\x1f")
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


BODY_FIELDS = ("tcp.srcport", "tcp.dstport", "kafka.correlation_id", "kafka.api_version", "kafka.topic_name",
               "kafka.partition_id", "kafka.offset", "kafka.error", "_ws.expert.severity", "_ws.expert.message")
# Expert infos about the capture itself, not about the Kafka dissection.
CAPTURE_EXPERTS = ("Frame length is less than captured length",)
EXPERT_WARNING = 0x600000


def tshark_bodies(tshark: str, capture, ports) -> dict:
    """(client port, correlation id, "request"|"response") → {"topics", "partitions", "offsets", "errors"}
    for every Kafka PDU tshark dissects without an expert warning or error. Frames holding more than
    one PDU are left out: tshark's fields don't say which PDU a value came from."""
    text = _fields(tshark, capture, ports, BODY_FIELDS, ",")
    found = {}
    for line in text.splitlines():
        fields = (line.split("\t") + [""] * 10)[:10]
        sport, dport, corr, version, topics, parts, offsets, errors, severity, messages = fields
        if "," in corr or not corr:
            continue
        experts = zip(severity.split(",") if severity else [], messages.split(",") if messages else [])
        if any(int(level) >= EXPERT_WARNING and not message.startswith(CAPTURE_EXPERTS)
               for level, message in experts):
            continue
        kind = "request" if version else "response"
        client_port = int(sport) if int(dport) in ports else int(dport)
        ints = lambda text: [int(v) for v in text.split(",")] if text else []  # noqa: E731
        found[(client_port, int(corr), kind)] = {
            "topics": set(topics.split(",")) if topics else set(), "partitions": set(ints(parts)),
            "offsets": set(ints(offsets)), "errors": set(ints(errors))}
    return found


def _walk_values(value, out: dict) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, bool):
                continue
            if isinstance(item, int):
                if key.endswith("error_code"):
                    out["errors"].add(item)
                elif key in ("partition", "partition_index", "index", "partition_id"):
                    out["partitions"].add(item)
                elif "offset" in key or key in ("high_watermark", "last_stable_offset"):
                    out["offsets"].add(item)
            elif key in ("partition_indexes", "partitions") and isinstance(item, list) and item \
                    and isinstance(item[0], int):
                out["partitions"].update(item)
            elif "offset" in key and isinstance(item, list) and item and isinstance(item[0], int):
                out["offsets"].update(item)  # ListOffsets v0's old_style_offsets
            elif isinstance(item, str) and key in ("name", "topic", "topic_name"):
                out["topics"].add(item)
            else:
                _walk_values(item, out)
    elif isinstance(value, list):
        for item in value:
            _walk_values(item, out)


def kinspect_bodies(records) -> dict:
    """The same view of kinspect's exchanges: every topic, partition, offset and error code in each body."""
    found = {}
    for r in records:
        if r.get("type") != "exchange":
            continue
        client_port = int(r["conn"].split("-")[0].rsplit(":", 1)[1])
        for kind in ("request", "response"):
            body = r.get(kind)
            if body is None:
                continue
            values = {"topics": set(), "partitions": set(), "offsets": set(), "errors": set()}
            _walk_values(body, values)
            found[(client_port, r["correlation_id"], kind)] = values
    return found


FRAME_FIELDS = ("frame.number", "tcp.srcport", "tcp.dstport", "kafka.correlation_id", "kafka.api_version",
                "tcp.segment")


def tshark_frames(tshark: str, capture, ports) -> dict:
    """(client port, server port, correlation id, "request"|"response") → [first, last]: the frame
    numbers of the packets that carry a Kafka PDU's first byte and its last (the frame tshark
    dissects it in). ``first`` is None where tshark's fields can't say it: a frame holding more
    than one PDU (its tcp.segment list is the reassembled one's only). Keys seen twice (a
    correlation id reused on one connection) are left out."""
    text = _fields(tshark, capture, ports, FRAME_FIELDS, ",")
    found: dict = {}
    twice: set = set()
    for line in text.splitlines():
        number, sport, dport, corrs, versions, segments = (line.split("\t") + [""] * 6)[:6]
        corrs = [int(c) for c in corrs.split(",") if c]
        one = len(corrs) == 1
        first = min(int(s) for s in segments.split(",")) if one and segments else int(number) if one else None
        for i, corr in enumerate(corrs):
            # requests carry an api_version; in a frame of several PDUs, they are all one kind
            kind = "request" if versions else "response"
            client, server = (int(sport), int(dport)) if kind == "request" else (int(dport), int(sport))
            key = (client, server, corr, kind)
            if key in found:
                twice.add(key)
            found[key] = [first, int(number)]
    for key in twice:
        del found[key]
    return found


def kinspect_frames(records) -> dict:
    """The same keys from kinspect's exchanges (their request_frames and response_frames) and
    responses without a request."""
    found = {}
    for r in records:
        if r.get("type") not in ("exchange", "orphan_response"):
            continue
        client, server = (int(side.rsplit(":", 1)[1]) for side in r["conn"].split("-"))
        for kind in ("request", "response"):
            frames = r.get(f"{kind}_frames")
            if frames is not None:
                found[(client, server, r["correlation_id"], kind)] = frames
    return found


def _fields(tshark: str, capture, ports, fields, aggregator: str) -> str:
    """tshark's -T fields text of every Kafka PDU (``ports`` decoded as Kafka): a line per frame,
    tab-separated, a field's several values joined by ``aggregator``."""
    cmd = [tshark, "-n", "-r", str(capture), "-Y", "kafka", "-T", "fields", "-E", "separator=\t",
           "-E", "occurrence=a", "-E", f"aggregator={aggregator}"]
    for port in sorted(ports):
        cmd += ["-d", f"tcp.port=={port},kafka"]
    for field in fields:
        cmd += ["-e", field]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
