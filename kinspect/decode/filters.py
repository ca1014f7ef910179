"""Which exchanges the user asked to see (decode's --api, --client-id, --topic, --errors,
--min-latency-ms, --conn, --correlation-id)."""

from __future__ import annotations

import fnmatch

from kinspect.wire import apis


# Top-level fields that hold per-topic entries across the APIs (Produce, Fetch, Metadata,
# ListOffsets, OffsetCommit/Fetch, CreateTopics, DeleteRecords, OffsetForLeaderEpoch, ...).
TOPIC_LISTS = ("topics", "topic_data", "responses", "results")


def topics_of(exchange: dict) -> set[str]:
    """Topic names an exchange touches, from the top-level topic lists of its bodies."""
    names: set[str] = set()
    for body in (exchange.get("request"), exchange.get("response")):
        if not isinstance(body, dict):
            continue
        for key in TOPIC_LISTS:
            value = body.get(key)
            if type(value) is list and value and type(value[0]) is dict:
                for item in value:
                    for key in ("name", "topic", "topic_name"):
                        name = item.get(key)
                        if isinstance(name, str):
                            names.add(name)
                            break
    return names


def resolve_api(text: str) -> int:
    """'Produce', 'produce', 'ProduceRequest' or '0' → 0. ValueError when unknown."""
    if text.lstrip("-").isdigit():
        return int(text)
    wanted = text.lower().removesuffix("request").removesuffix("response")
    for key, name in apis.API_NAMES.items():
        if name.lower() == wanted:
            return key
    raise ValueError(f"unknown API {text!r}: use a name like Produce or Fetch, or a key number")


def conn_matches(conn: str, pattern: str) -> bool:
    """``pattern`` against a connection ``client-broker`` ("10.0.0.5:51234-10.0.0.9:9092"): a glob
    over the whole text, or an endpoint (HOST:PORT, :PORT or HOST, globs allowed) either side."""
    if fnmatch.fnmatchcase(conn, pattern):
        return True
    for endpoint in _endpoints(conn):
        host, _, port = endpoint.rpartition(":")
        if fnmatch.fnmatchcase(endpoint, pattern) or fnmatch.fnmatchcase(host.strip("[]"), pattern) \
                or (pattern.startswith(":") and fnmatch.fnmatchcase(port, pattern[1:])):
            return True
    return False


def _endpoints(conn: str) -> tuple[str, ...]:
    """The two ends of ``client-broker``; IPv6 hosts are bracketed, so the dash between the two
    is the one after the first endpoint's port."""
    first, _, port_rest = conn.partition("]:") if conn.startswith("[") else ("", "", "")
    if first:
        port, _, second = port_rest.partition("-")
        return (f"{first}]:{port}", second)
    host_port, _, second = conn.partition("-")
    return (host_port, second)


class ExchangeFilter:
    def __init__(self, api_keys=(), client_ids=(), topics=(), errors_only=False, min_latency_ms=None,
                 conns=(), correlation_ids=()):
        self.api_keys = frozenset(api_keys)
        self.client_ids = tuple(client_ids)
        self.topics = frozenset(topics)
        self.errors_only = errors_only
        self.min_latency_ms = min_latency_ms
        self.conns = tuple(conns)
        self.correlation_ids = frozenset(correlation_ids)

    @property
    def active(self) -> bool:
        return bool(self.api_keys or self.client_ids or self.topics or self.errors_only
                    or self.min_latency_ms is not None or self.conns or self.correlation_ids)

    def describe(self) -> str:
        """The filters as they were given: ``--api Fetch --topic orders``."""
        given = [*(f"--api {apis.API_NAMES.get(k, k)}" for k in sorted(self.api_keys)),
                 *(f"--client-id {c}" for c in self.client_ids), *(f"--topic {t}" for t in sorted(self.topics)),
                 *(["--errors"] if self.errors_only else []),
                 *([f"--min-latency-ms {self.min_latency_ms:g}"] if self.min_latency_ms is not None else []),
                 *(f"--conn {c}" for c in self.conns),
                 *(f"--correlation-id {n}" for n in sorted(self.correlation_ids))]
        return " ".join(given)

    def __call__(self, record: dict) -> bool:
        if self.conns and not any(conn_matches(record.get("conn") or "", p) for p in self.conns):
            return False  # notices and orphans of other connections too
        if record.get("type") != "exchange":
            # Notices and orphans only survive filters that can't exclude them.
            return not (self.api_keys or self.client_ids or self.topics or self.min_latency_ms is not None
                        or self.correlation_ids)
        if self.correlation_ids and record["correlation_id"] not in self.correlation_ids:
            return False
        if self.api_keys and record["api_key"] not in self.api_keys:
            return False
        if self.client_ids:
            client_id = record.get("client_id") or ""
            if not any(fnmatch.fnmatchcase(client_id, pattern) for pattern in self.client_ids):
                return False
        if self.errors_only and not record["error_codes"] and not any(
                p.get("severity") == "error" for p in record["problems"]):
            return False
        if self.min_latency_ms is not None:
            latency = record.get("latency_ms")
            if latency is None or latency < self.min_latency_ms:
                return False
        if self.topics and not (topics_of(record) & self.topics):
            return False
        return True
