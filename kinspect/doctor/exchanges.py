"""Reading a finished exchange (decode's dict): who sent it, to which broker, which topics.

The brokers' own clients share the port and are not users: the transaction marker sender
(``broker-N-txn-marker-sender``), the AddPartitionsToTxn verifier (``AddPartitionsManager-...``),
replica fetchers and the other ``broker-N-...`` channels, and any Fetch from a replica
(replica_id >= 0)."""

from __future__ import annotations

import re

FETCH = 1
_INTERNAL = re.compile(r"broker-\d+-|AddPartitionsManager-")


def is_internal(record: dict) -> bool:
    """Whether a broker sent it (the answer is kept in the record: every check asks)."""
    known = record.get(_KEY)
    if known is None:
        known = record[_KEY] = _internal(record)
    return known


_KEY = "_internal"


def _internal(record: dict) -> bool:
    client_id = record.get("client_id")
    if isinstance(client_id, str) and _INTERNAL.match(client_id):
        return True
    if record.get("api_key") == FETCH:
        request = record.get("request") or {}
        replica = request.get("replica_id")
        if replica is None:
            replica = (request.get("replica_state") or {}).get("replica_id")
        return isinstance(replica, int) and replica >= 0
    return False


def ends(conn: str | None) -> tuple[str, str]:
    """("client host:port", "broker host:port") of decode's connection text."""
    if not conn:
        return "", ""
    client, _, broker = conn.partition("-")
    return client, broker


def host(endpoint: str) -> str:
    """The address of 'host:port' or '[v6]:port'."""
    if endpoint.startswith("["):
        return endpoint[1:endpoint.find("]")] if "]" in endpoint else endpoint
    return endpoint.rpartition(":")[0] or endpoint


def topic_name(item: dict):
    """A topic entry's name as decode gives it (the name, or the name it found for a topic id)."""
    for key in ("topic", "name", "topic_name"):
        name = item.get(key)
        if name is not None:
            return name
    return item.get("topic_id")


def batches(records) -> list:
    """The batch dicts of a records field (a list of batches, or None)."""
    return records if isinstance(records, list) else []


def batch_count(batch: dict) -> int:
    """Records a batch holds, from its header (last offset delta + 1)."""
    delta = batch.get("last_offset_delta")
    if isinstance(delta, int) and delta >= 0:
        return delta + 1
    count = batch.get("records_count")
    return count if isinstance(count, int) and count > 0 else 1
