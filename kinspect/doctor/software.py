"""Which software a connection runs: ApiVersions v3+ requests name it (client_software_name and
client_software_version, KIP-511); a connection that sent none takes its client id's."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded

API_VERSIONS = 18


class Software:
    def __init__(self, limit: int):
        self.conns: Bounded[list] = Bounded("connections", limit, list)
        self.clients: Bounded[list] = Bounded("client ids", limit, list)

    @property
    def bounded(self):
        return [self.conns, self.clients]

    def exchange(self, record: dict) -> None:
        if record["api_key"] != API_VERSIONS:
            return
        request = record.get("request") or {}
        name = request.get("client_software_name")
        if name is None:
            return
        named = [name, request.get("client_software_version")]
        self.conns.at(record.get("conn"))[:] = named
        self.clients.at(record.get("client_id"))[:] = named

    def of(self, conn, client_id) -> tuple:
        """(name, version), or (None, None) when the capture never said."""
        named = self.conns.get(conn) or self.clients.get(client_id)
        return tuple(named) if named else (None, None)
