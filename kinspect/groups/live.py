"""A tiny blocking Kafka client over a socket, speaking through kinspect's own wire codec.

    with Cluster("localhost:9092") as cluster:
        view = cluster.describe("orders-app")      # GroupsView, like kafka-consumer-groups

Each request is encoded with kinspect.wire.encode at the highest version both the broker
(ApiVersions) and kinspect know, and each response is decoded with kinspect.wire.messages: no
client library. FindCoordinator finds a group's coordinator; OffsetFetch reads its offsets;
ConsumerGroupDescribe (KIP-848 groups) or DescribeGroups (classic) its state and members;
Metadata names topics and finds partition leaders, which ListOffsets asks for log end offsets.
"""

from __future__ import annotations

import socket
import struct
import time

from kinspect.groups import responses
from kinspect.groups.model import CLASSIC, Group, GroupsView
from kinspect.problems import WARNING, Problem
from kinspect.wire.apis import api_name, error_name, is_known, response_header_version
from kinspect.wire.encode import encode_request
from kinspect.wire.headers import parse_response_header
from kinspect.wire.layouts import layout
from kinspect.wire.messages import decode_body

LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR = 2, 3, 9, 10
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, CONSUMER_GROUP_DESCRIBE = 15, 16, 18, 69
MAX_RESPONSE = 64 << 20
RETRIABLE = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
GROUP_ID_NOT_FOUND = 69
LATEST = -1
_I32 = struct.Struct(">i")


class LiveError(Exception):
    """The broker cannot be reached or does not answer as Kafka does."""


class Connection:
    def __init__(self, host: str, port: int, *, timeout: float = 15.0,
                 client_id: str = "kinspect"):
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.problems: list[Problem] = []
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            raise LiveError(f"cannot connect to {self.address}: {e.strerror or e}") from None
        self._correlation = 0
        try:
            self.versions: dict[int, tuple[int, int]] = self._api_versions()
        except BaseException:
            self.sock.close()
            raise

    def close(self) -> None:
        self.sock.close()

    def version(self, api_key: int) -> int:
        """The highest version of api_key that the broker and kinspect both speak."""
        low, high = self.versions.get(api_key, (0, -1))
        for version in range(high, low - 1, -1):
            if (is_known(api_key, version) and layout(api_key, version, "request")
                    and layout(api_key, version, "response")):
                return version
        raise LiveError(f"{self.address} does not offer {api_name(api_key)} in a version "
                        f"kinspect speaks (broker: {low}..{high})")

    def call(self, api_key: int, build, version: int | None = None) -> tuple[int, dict]:
        """Send build(version) as api_key's request; (version, decoded response body)."""
        if version is None:
            version = self.version(api_key)
        self._correlation += 1
        correlation = self._correlation
        frame = encode_request(api_key, version, correlation, self.client_id, build(version))
        try:
            self.sock.sendall(frame)
            payload = self._read_frame()
        except OSError as e:
            raise LiveError(f"{self.address}: {api_name(api_key)} failed: "
                            f"{e.strerror or e}") from None
        header = parse_response_header(payload, response_header_version(api_key, version))
        if header is None or header[0] != correlation:
            raise LiveError(f"{self.address}: {api_name(api_key)} answered with correlation id "
                            f"{None if header is None else header[0]}, not {correlation}")
        where = f"{self.address} {api_name(api_key)}Response v{version}"
        body, problems = decode_body(api_key, version, "response", payload[header[1]:],
                                     header[1], where)
        self.problems += [p for p in problems if p.severity != "info"]
        return version, body

    def _read_frame(self) -> bytes:
        size = _I32.unpack(self._read(4))[0]
        if size < 4 or size > MAX_RESPONSE:
            raise LiveError(f"{self.address}: response size {size} is not plausible for Kafka")
        return self._read(size)

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(min(left, 1 << 20))
            if not chunk:
                raise LiveError(f"{self.address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        # v3 first; a broker without it answers v0-shaped with UNSUPPORTED_VERSION (decoded)
        _, body = self.call(API_VERSIONS, lambda v: {"client_software_name": "kinspect",
                                                     "client_software_version": "0"}, 3)
        versions = {k["api_key"]: (k["min_version"], k["max_version"])
                    for k in body.get("api_keys") or ()}
        if not versions:
            raise LiveError(f"{self.address} did not list its API versions "
                            f"({error_name(body.get('error_code', -1))}): is it a Kafka broker?")
        return versions


class Cluster:
    """Connections to a cluster's brokers, opened as needed, and the calls kinspect makes."""

    def __init__(self, bootstrap: str, *, timeout: float = 15.0, retries: int = 20):
        self.timeout = timeout
        self.retries = retries
        self._connections: dict[str, Connection] = {}
        self.bootstrap = self._connect(*parse_address(bootstrap))
        self.brokers: dict[int, tuple[str, int]] = {}
        self.topic_names: dict[str, str] = {}
        self.leaders: dict[tuple[str, int], int] = {}

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        for connection in self._connections.values():
            connection.close()

    @property
    def problems(self) -> list[Problem]:
        return [p for c in self._connections.values() for p in c.problems]

    # -- what kinspect offsets shows ----------------------------------------------------------

    def describe(self, group: str | None = None) -> GroupsView:
        self.metadata()
        view = GroupsView(topic_names=dict(self.topic_names))
        listed = {} if group else self.list_groups()
        for group_id in [group] if group else sorted(listed):
            node, connection = self.coordinator(group_id)
            found = self.describe_group(connection, group_id) or Group(group_id, CLASSIC)
            if group_id in listed and found.state is None:
                found.state, found.kind = listed[group_id]
            found.offsets = self.committed(connection, group_id, view)
            host, port = self.brokers.get(node, ("?", 0))
            found.coordinator = f"{host}:{port} (id {node})"
            if found.state in (None, "Dead") and not found.offsets and group:
                view.notes.append(f"group {group_id} does not exist on {self.bootstrap.address}")
                continue
            view.groups[group_id] = found
        wanted = {tp for g in view.groups.values() for tp in g.offsets}
        wanted |= {tp for g in view.groups.values() for m in g.members.values()
                   for tp in m.assignment}
        view.log_end_offsets = self.log_end_offsets(wanted)
        view.problems = self.problems
        return view

    # -- single requests -------------------------------------------------------------------

    def metadata(self) -> None:
        def build(v):
            return {"topics": None if v >= 1 else [], "allow_auto_topic_creation": False}
        _, body = self.bootstrap.call(METADATA, build)
        self.brokers = {b["node_id"]: (b["host"], b["port"]) for b in body.get("brokers") or ()}
        for topic in body.get("topics") or ():
            if topic.get("topic_id"):
                self.topic_names[topic["topic_id"]] = topic["name"]
            for p in topic.get("partitions") or ():
                self.leaders[(topic["name"], p["partition_index"])] = p.get("leader_id", -1)

    def list_groups(self) -> dict[str, tuple[str | None, str]]:
        """Group id → (state, type) from every broker (each lists the groups it coordinates)."""
        groups = {}
        for node in sorted(self.brokers) or [None]:
            connection = self.bootstrap if node is None else self._connect(*self.brokers[node])
            _, body = connection.call(LIST_GROUPS, lambda v: {"states_filter": [],
                                                               "types_filter": []})
            if body.get("error_code"):
                raise LiveError(f"{connection.address}: ListGroups failed: "
                                f"{error_name(body['error_code'])}")
            for g in body.get("groups") or ():
                kind = (g.get("group_type") or CLASSIC).lower()
                groups[g["group_id"]] = (g.get("group_state") or None, kind)
        return groups

    def coordinator(self, group_id: str) -> tuple[int, Connection]:
        for _ in range(self.retries):
            version, body = self.bootstrap.call(FIND_COORDINATOR, lambda v: (
                {"key_type": 0, "coordinator_keys": [group_id]} if v >= 4
                else {"key": group_id, "key_type": 0}))
            found = (body.get("coordinators") or [{}])[0] if version >= 4 else body
            error = found.get("error_code", -1)
            if error == 0:
                self.brokers.setdefault(found["node_id"], (found["host"], found["port"]))
                return found["node_id"], self._connect(found["host"], found["port"])
            if error not in RETRIABLE:
                raise LiveError(f"FindCoordinator for group {group_id!r}: {error_name(error)}")
            time.sleep(0.5)
        raise LiveError(f"no coordinator for group {group_id!r} after {self.retries} tries")

    def committed(self, connection: Connection, group_id: str, view: GroupsView) -> dict:
        topics = sorted({t for t, _ in self.leaders})

        def build(v):
            if v >= 8:
                return {"groups": [{"group_id": group_id, "member_id": None, "member_epoch": -1,
                                    "topics": None}], "require_stable": False}
            asked = None if v >= 2 else [{"name": t, "partition_indexes": sorted(
                p for (name, p) in self.leaders if name == t)} for t in topics]
            return {"group_id": group_id, "topics": asked, "require_stable": False}
        for _ in range(self.retries):
            _, body = connection.call(OFFSET_FETCH, build)
            request = {"group_id": group_id}
            for gid, error, entries in responses.fetched_groups(body, request):
                if error in RETRIABLE:
                    break
                if error and error != GROUP_ID_NOT_FOUND:
                    view.problems.append(Problem(f"OffsetFetch for {gid}: {error_name(error)}",
                                                 connection.address, None, WARNING, "live"))
                    return {}
                found, _, failed = responses.fetched_offsets(gid, entries, self.topic_names,
                                                             source=connection.address)
                for topic, partition, name in failed:
                    view.problems.append(Problem(
                        f"OffsetFetch {gid} {topic}-{partition}: {name}", connection.address,
                        None, WARNING, "live"))
                return {(c.topic, c.partition): c for c in found}
            time.sleep(0.5)
        raise LiveError(f"OffsetFetch for group {group_id!r} kept failing")

    def describe_group(self, connection: Connection, group_id: str) -> Group | None:
        if CONSUMER_GROUP_DESCRIBE in connection.versions:
            _, body = connection.call(CONSUMER_GROUP_DESCRIBE, lambda v: {
                "group_ids": [group_id], "include_authorized_operations": False})
            for entry in body.get("groups") or ():
                if entry.get("group_id") == group_id and not entry.get("error_code"):
                    return responses.consumer_group(entry, self.topic_names)
        _, body = connection.call(DESCRIBE_GROUPS, lambda v: {
            "groups": [group_id], "include_authorized_operations": False})
        for entry in body.get("groups") or ():
            if entry.get("group_id") == group_id and not entry.get("error_code"):
                group = responses.classic_group(entry)
                return None if group.state == "Dead" else group
        return None

    def log_end_offsets(self, partitions) -> dict[tuple[str, int], int]:
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in partitions:
            leader = self.leaders.get((topic, partition), -1)
            if leader in self.brokers:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        ends = {}
        for leader, topics in sorted(by_leader.items()):
            asked = [{"name": t, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": LATEST,
                 "max_num_offsets": 1} for p in sorted(ps)]} for t, ps in sorted(topics.items())]
            _, body = self._connect(*self.brokers[leader]).call(LIST_OFFSETS, lambda v: {
                "replica_id": -1, "isolation_level": 0, "timeout_ms": int(self.timeout * 1000),
                "topics": asked})
            for topic in body.get("topics") or ():
                for p in topic.get("partitions") or ():
                    if p.get("error_code"):
                        continue
                    offset = p.get("offset")
                    if offset is None and p.get("old_style_offsets"):
                        offset = p["old_style_offsets"][0]
                    if offset is not None:
                        ends[(topic["name"], p["partition_index"])] = offset
        return ends

    def _connect(self, host: str, port: int) -> Connection:
        address = f"{host}:{port}"
        if address not in self._connections:
            self._connections[address] = Connection(host, port, timeout=self.timeout)
        return self._connections[address]


def parse_address(text: str) -> tuple[str, int]:
    """host:port ([v6]:port too); the first of a comma-separated list."""
    first = text.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise LiveError(f"{text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)
