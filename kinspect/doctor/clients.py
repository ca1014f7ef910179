"""The client inventory one more upgrade needs (``kinspect clients``): per client id and
software (ApiVersions v3+ names it), the addresses and connections it came from, the APIs and
versions it used, its KIP-896 readiness, whether it honoured throttling, the topics it produced
to and fetched from, and its errors. Bounded like the checks: past the limit, the least recently
seen clients go, and a notice says so."""

from __future__ import annotations

from kinspect.doctor import kip896
from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import ends, host, is_internal, topic_name
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.doctor.software import Software
from kinspect.doctor.throttle import Throttle
from kinspect.wire.apis import api_name

PRODUCE, FETCH = 0, 1
LISTED = 100  # addresses, brokers and topics listed per client

COLUMNS = ["client_id", "software_name", "software_version", "addresses", "connections", "apis",
           "kip896_ready", "removed_versions", "throttling_honoured", "produced_topics",
           "fetched_topics", "errors"]


class _Client:
    __slots__ = ("addresses", "brokers", "conns", "apis", "requests", "produced", "fetched", "errors",
                 "first", "last", "internal")

    def __init__(self):
        self.addresses: set = set()
        self.brokers: set = set()
        self.conns = 0
        self.apis: dict = {}      # api key -> set of versions
        self.requests = 0
        self.produced: set = set()
        self.fetched: set = set()
        self.errors: dict = {}
        self.first = self.last = None
        self.internal = False


class Inventory:
    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.software = Software(thresholds.max_state)
        self.throttle = Throttle(thresholds)
        self.clients: Bounded[_Client] = Bounded("clients", thresholds.max_state, _Client)
        self.conns: Bounded[bool] = Bounded("connections", thresholds.max_state, lambda: True)

    @property
    def bounded(self):
        return [self.clients, self.conns, *self.software.bounded, *self.throttle.bounded]

    def exchange(self, record: dict) -> None:
        if record.get("type") != "exchange":
            return
        self.software.exchange(record)
        self.throttle.exchange(record)
        conn = record.get("conn")
        client_id = record.get("client_id")
        name, version = self.software.of(conn, client_id)
        entry = self.clients.at((client_id, name, version))
        entry.requests += 1
        entry.internal = entry.internal or is_internal(record)
        sent = record.get("request_time")
        entry.first = sent if entry.first is None else entry.first
        entry.last = sent
        if conn not in self.conns.items:
            self.conns.at(conn)
            entry.conns += 1
        client, broker = ends(conn)
        _add(entry.addresses, host(client))
        _add(entry.brokers, broker)
        entry.apis.setdefault(record["api_key"], set()).add(record.get("api_version"))
        for code in record.get("error_codes") or ():
            entry.errors[code] = entry.errors.get(code, 0) + 1
        request = record.get("request") or {}
        if record["api_key"] == PRODUCE:
            for topic in request.get("topic_data") or ():
                _add(entry.produced, topic_name(topic))
        elif record["api_key"] == FETCH:
            for topic in request.get("topics") or ():
                _add(entry.fetched, topic_name(topic))

    def rows(self) -> list[dict]:
        rows = []
        for (client_id, name, version), entry in self.clients.items.items():
            removed = [f"{api_name(k)} v{v}" for k, vs in sorted(entry.apis.items()) for v in sorted(vs)
                       if kip896.removed(k, v)]
            rows.append({
                "type": "client", "client_id": client_id, "software_name": name, "software_version": version,
                "internal": entry.internal, "addresses": sorted(entry.addresses), "brokers": sorted(entry.brokers),
                "connections": entry.conns, "requests": entry.requests,
                "apis": [{"api_key": k, "api_name": api_name(k), "versions": sorted(vs)}
                         for k, vs in sorted(entry.apis.items())],
                "kip896_ready": not removed, "removed_versions": removed,
                "throttling_honoured": self.throttle.honoured(client_id),
                "throttle_ms": sum(e.total_ms for (c, _), e in self.throttle.throttled.items.items()
                                   if c == client_id),
                "produced_topics": sorted(map(str, entry.produced)), "fetched_topics": sorted(map(str, entry.fetched)),
                "errors": dict(sorted(entry.errors.items())), "first_seen": entry.first, "last_seen": entry.last,
            })
        return sorted(rows, key=lambda r: (r["internal"], str(r["client_id"]), str(r["software_name"])))

    def notices(self) -> list[dict]:
        return [n for b in self.bounded if (n := b.notice("clients")) is not None]


def _add(values: set, value) -> None:
    if value is not None and (value in values or len(values) < LISTED):
        values.add(value)
