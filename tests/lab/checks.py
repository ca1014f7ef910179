"""kinspect's `decode --json` output checked against a lab manifest (what the clients did).

Each check returns a list of human-readable mismatches; empty means it holds. The JSON Lines
contract is DESIGN.md's: "exchange" lines carry api_key, api_name, api_version,
correlation_id, client_id, request, response, latency_ms, error_codes, problems; "notice" and
"orphan_response" lines exist too. Record sets are lists of batches with "records".
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tests.lab.api_names import API_NAMES

REPO = Path(__file__).resolve().parents[2]
EXCHANGE_KEYS = ("api_key", "api_name", "api_version", "correlation_id", "client_id", "request",
                 "response", "latency_ms", "error_codes", "problems")
PRODUCE, FETCH, OFFSET_COMMIT = 0, 1, 8


@dataclass
class Decoded:
    lines: list[dict]
    stderr: str

    def of_type(self, kind: str) -> list[dict]:
        return [line for line in self.lines if line.get("type") == kind]

    @property
    def exchanges(self) -> list[dict]:
        return self.of_type("exchange")


class DecodeFailed(AssertionError):
    pass


def decode(capture: Path, timeout: float = 300) -> Decoded:
    """Run `python -m kinspect decode --json CAPTURE`; every stdout line must be a JSON object."""
    proc = subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", str(capture)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise DecodeFailed(f"kinspect decode exited {proc.returncode} on {capture.name}:\n"
                           + proc.stderr[-3000:])
    lines = []
    for number, text in enumerate(proc.stdout.splitlines(), 1):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DecodeFailed(f"{capture.name} line {number} is not JSON ({exc}): {text[:300]}")
        if not isinstance(obj, dict) or "type" not in obj:
            raise DecodeFailed(f"{capture.name} line {number} is not an object with a type: {text[:300]}")
        lines.append(obj)
    return Decoded(lines, proc.stderr)


def _label(key_version: tuple[int, int]) -> str:
    key, version = key_version
    return f"{API_NAMES.get(key, key)} (key {key}) v{version}"


def client_tally(manifest: dict, column: str) -> Counter:
    """Sum over the capture's clients of "sent" or "received", per (api_key, api_version)."""
    total = Counter()
    for client in manifest["clients"]:
        for r in client["requests"]:
            total[(r["api_key"], r["api_version"])] += r[column]
    return total


def check_request_counts(decoded: Decoded, manifest: dict) -> list[str]:
    """Exchanges per (api_key, api_version) equal what the clients logged as sent."""
    expected = client_tally(manifest, "sent")
    found = Counter((e.get("api_key"), e.get("api_version")) for e in decoded.exchanges)
    return [f"{_label(kv)}: clients sent {expected[kv]}, decode shows {found[kv]}"
            for kv in sorted(set(expected) | set(found), key=str) if expected[kv] != found[kv]]


def check_exchange_shape(decoded: Decoded) -> list[str]:
    """Every exchange has the contract's fields; answered ones a non-negative latency."""
    bad = []
    for e in decoded.exchanges:
        where = f"exchange {e.get('api_name')} v{e.get('api_version')} corr {e.get('correlation_id')}"
        missing = [k for k in EXCHANGE_KEYS if k not in e]
        if missing:
            bad.append(f"{where}: missing {missing}")
            continue
        if e["api_name"] != API_NAMES.get(e["api_key"]):
            bad.append(f"{where}: api_name {e['api_name']!r} for key {e['api_key']}")
        if not isinstance(e["error_codes"], list) or not isinstance(e["problems"], list):
            bad.append(f"{where}: error_codes/problems are not lists")
        latency = e["latency_ms"]
        if e["response"] is None:
            if latency is not None:
                bad.append(f"{where}: no response but latency_ms {latency}")
        elif not isinstance(latency, (int, float)) or latency < 0:
            bad.append(f"{where}: answered with latency_ms {latency!r}")
    return bad


def check_answered(decoded: Decoded, manifest: dict) -> list[str]:
    """Every response a client logged as received is in the capture, paired with its request."""
    received = client_tally(manifest, "received")
    answered = Counter((e.get("api_key"), e.get("api_version")) for e in decoded.exchanges
                       if e.get("response") is not None)
    bad = [f"{_label(kv)}: clients received {n} responses, decode pairs {answered[kv]}"
           for kv, n in sorted(received.items()) if answered[kv] < n]
    bad += [f"orphan response: {json.dumps(o)[:300]}" for o in decoded.of_type("orphan_response")]
    return bad


def value_text(value) -> str | None:
    """A decoded bytes field: a JSON string when UTF-8, else {"b64": ...}."""
    if isinstance(value, dict) and "b64" in value:
        return base64.b64decode(value["b64"]).decode("utf-8", "replace")
    return value


def iter_records(record_set):
    """Records of a record set: batches → records; legacy wrappers may nest one level more."""
    for batch in record_set or ():
        for record in batch.get("records") or ():
            if isinstance(record, dict) and record.get("records") is not None and "value" not in record:
                yield from iter_records([record])
            elif isinstance(record, dict):
                yield record


def produced_records(decoded: Decoded):
    """(topic, partition, record) for every record in every Produce request."""
    for e in decoded.exchanges:
        if e.get("api_key") != PRODUCE or not e.get("request"):
            continue
        for topic in e["request"].get("topic_data") or ():
            for partition in topic.get("partition_data") or ():
                for record in iter_records(partition.get("records")):
                    yield topic.get("name"), partition.get("index"), record


def fetched_values(decoded: Decoded) -> set[str]:
    values = set()
    for e in decoded.exchanges:
        if e.get("api_key") != FETCH or not e.get("response"):
            continue
        for topic in e["response"].get("responses") or ():
            for partition in topic.get("partitions") or ():
                values.update(value_text(r.get("value")) for r in iter_records(partition.get("records")))
    return values


def check_produced_values(decoded: Decoded, manifest: dict) -> list[str]:
    """Every value a client produced is in a Produce request, with its key, topic, partition."""
    seen: dict[str, list[tuple]] = {}
    for topic, partition, record in produced_records(decoded):
        seen.setdefault(value_text(record.get("value")), []).append((topic, partition, record))
    bad = []
    for client in manifest["clients"]:
        for p in client["produced"]:
            places = seen.get(p["value"])
            if not places:
                bad.append(f"{client['client']}: produced value {p['value'][:60]!r} not in any Produce request")
                continue
            if not any(t == p["topic"] and value_text(r.get("key")) == p["key"] for t, _, r in places):
                bad.append(f"{client['client']}: {p['value'][:60]!r} not found with topic "
                           f"{p['topic']!r} and key {p['key']!r}: {places[0][:2]}")
            if p["delivered"] and not any(part == p["partition"] for _, part, _ in places):
                bad.append(f"{client['client']}: {p['value'][:60]!r} delivered to partition "
                           f"{p['partition']}, decode shows {[part for _, part, _ in places]}")
            if p["headers"] and not any(_header_keys(r) >= {k for k, _ in p["headers"]} for *_, r in places):
                bad.append(f"{client['client']}: {p['value'][:60]!r} lost its headers {p['headers']}")
    return bad


def _header_keys(record: dict) -> set[str]:
    keys = set()
    for header in record.get("headers") or ():
        key = header.get("key") if isinstance(header, dict) else header[0]
        keys.add(value_text(key))
    return keys


def check_consumed_values(decoded: Decoded, manifest: dict) -> list[str]:
    """Every value a consumer received is in a Fetch response."""
    fetched = fetched_values(decoded)
    return [f"{c['client']}: consumed value {v['value'][:60]!r} not in any Fetch response"
            for c in manifest["clients"] for v in c["consumed"] if v["value"] not in fetched]


def committed_in_capture(decoded: Decoded) -> dict[tuple, int]:
    """(group, topic, partition) → last committed offset the broker accepted (error 0)."""
    commits = {}
    for e in decoded.exchanges:
        if e.get("api_key") != OFFSET_COMMIT or not e.get("request") or not e.get("response"):
            continue
        accepted = {(t.get("name"), p.get("partition_index"))
                    for t in e["response"].get("topics") or ()
                    for p in t.get("partitions") or () if p.get("error_code") == 0}
        group = e["request"].get("group_id")
        for t in e["request"].get("topics") or ():
            for p in t.get("partitions") or ():
                if (t.get("name"), p.get("partition_index")) in accepted:
                    commits[(group, t.get("name"), p.get("partition_index"))] = p.get("committed_offset")
    return commits


def check_commits(decoded: Decoded, manifest: dict) -> list[str]:
    """Offsets the clients report as committed were committed, and accepted, in the capture."""
    commits = committed_in_capture(decoded)
    bad = []
    for client in manifest["clients"]:
        for c in client["committed"]:
            where = (c["group"], c["topic"], c["partition"])
            if commits.get(where) != c["offset"]:
                bad.append(f"{client['client']}: committed {where} = {c['offset']}, "
                           f"decode shows {commits.get(where)}")
    return bad


ALL_CHECKS = {
    "request_counts": check_request_counts,
    "answered": check_answered,
    "produced_values": check_produced_values,
    "consumed_values": check_consumed_values,
    "commits": check_commits,
}
