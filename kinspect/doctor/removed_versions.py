"""removed_api_versions: API versions a client used that Kafka 4.0 no longer accepts (KIP-896),
derived from Kafka's message specs (kip896.py). Per client id and software: each API with the
removed versions it used and the oldest version 4.x accepts.

Severity: warning (the client breaks when its brokers move to Kafka 4). The brokers' own
clients are upgraded with them and are not counted."""

from __future__ import annotations

from kinspect.doctor import kip896
from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import is_internal
from kinspect.doctor.finding import WARNING, evidence, finding
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.doctor.software import Software
from kinspect.wire.apis import api_name

NAME = "removed_api_versions"


class _Client:
    __slots__ = ("used", "evidence")

    def __init__(self):
        self.used: dict = {}  # (api_key, version) -> count
        self.evidence: list = []


class RemovedVersions:
    name = NAME
    apis = None

    def __init__(self, thresholds: Thresholds = DEFAULTS, software: Software | None = None):
        self.software = software or Software(thresholds.max_state)
        self._own_software = software is None
        self.clients: Bounded[_Client] = Bounded("clients", thresholds.max_state, _Client)

    @property
    def bounded(self):
        return [self.clients] + (self.software.bounded if self._own_software else [])

    def exchange(self, record: dict) -> None:
        if self._own_software:
            self.software.exchange(record)
        api_key, version = record["api_key"], record.get("api_version")
        if not kip896.removed(api_key, version) or is_internal(record):
            return
        client = self.clients.at((record.get("client_id"), self.software.of(record.get("conn"),
                                                                               record.get("client_id"))))
        client.used[(api_key, version)] = client.used.get((api_key, version), 0) + 1
        if len(client.evidence) < 5 and not any(e["conn"] == record.get("conn") for e in client.evidence):
            client.evidence.append(evidence(record))

    def finish(self, end: float):
        for (client_id, (name, version)), client in self.clients.items.items():
            apis = {}
            for (key, used), count in sorted(client.used.items()):
                entry = apis.setdefault(key, {"api_key": key, "api_name": api_name(key), "versions": [],
                                              "requests": 0, "lowest_accepted": kip896.lowest_accepted(key)})
                entry["versions"].append(used)
                entry["requests"] += count
            listed = ", ".join(f"{a['api_name']} v{','.join(map(str, a['versions']))}" for a in apis.values())
            software = f" ({name} {version})" if name else ""
            yield finding(NAME, WARNING, f"client {client_id}{software} uses API versions Kafka 4.0 "
                                         f"removed (KIP-896): {listed}",
                          client.evidence, client_id=client_id, software_name=name, software_version=version,
                          apis=list(apis.values()))
