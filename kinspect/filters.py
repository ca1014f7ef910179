"""Which exchanges the user asked to see (decode's --api, --client-id, --topic, --errors, --min-latency-ms)."""

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


class ExchangeFilter:
    def __init__(self, api_keys=(), client_ids=(), topics=(), errors_only=False, min_latency_ms=None):
        self.api_keys = frozenset(api_keys)
        self.client_ids = tuple(client_ids)
        self.topics = frozenset(topics)
        self.errors_only = errors_only
        self.min_latency_ms = min_latency_ms

    @property
    def active(self) -> bool:
        return bool(self.api_keys or self.client_ids or self.topics or self.errors_only
                    or self.min_latency_ms is not None)

    def __call__(self, record: dict) -> bool:
        if record.get("type") != "exchange":
            # Notices and orphans only survive filters that can't exclude them.
            return not (self.api_keys or self.client_ids or self.topics or self.min_latency_ms is not None)
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
