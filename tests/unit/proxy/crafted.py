"""A small real broker for the proxy's tests, where a real Kafka broker cannot produce the case: a
TCP server on loopback (its own thread and event loop) that reads Kafka request frames and
answers each with a response built by kinspect's encoder: ApiVersions, Metadata naming whatever
``brokers`` holds at that moment (a test changes it between requests), and DescribeCluster naming
``cluster_brokers`` (or ``brokers``); or, for the API keys in ``raw``, the bytes it gives, and the
connection's end. Any other request gets no answer (it is only read), and ``received`` counts the
bytes read.

    with CraftedBroker(brokers=[(0, "127.0.0.1", 9092)]) as broker:
        broker.address        # (host, port) for --upstream
        broker.brokers = [...]  # what the next Metadata response names
"""

from __future__ import annotations

import asyncio
import struct
import threading

from kinspect.wire.apis import response_header_version
from kinspect.wire.encode import encode_body
from kinspect.wire.headers import parse_request_header

API_VERSIONS, METADATA, DESCRIBE_CLUSTER = 18, 3, 60
METADATA_VERSION = 12  # what the tests' clients ask; the answer is at the version asked


def response_frame(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    payload = struct.pack(">i", correlation_id)
    if response_header_version(api_key, api_version):
        payload += b"\x00"
    payload += encode_body(api_key, api_version, "response", body)
    return struct.pack(">i", len(payload)) + payload


def metadata_body(brokers) -> dict:
    return {"throttle_time_ms": 0, "cluster_id": "crafted", "controller_id": -1, "topics": [],
            "brokers": [{"node_id": node, "host": host, "port": port, "rack": None} for node, host, port in brokers]}


def metadata_request(correlation_id: int, client_id: str = "crafted-client") -> bytes:
    from kinspect.wire.encode import encode_request
    return encode_request(METADATA, METADATA_VERSION, correlation_id, client_id,
                          {"topics": [], "allow_auto_topic_creation": False,
                           "include_topic_authorized_operations": False})


def describe_cluster_request(correlation_id: int) -> bytes:
    from kinspect.wire.encode import encode_request
    return encode_request(DESCRIBE_CLUSTER, 0, correlation_id, "crafted-client",
                          {"include_cluster_authorized_operations": False})


def cluster_brokers(frame: bytes) -> list[tuple[int, str, int]]:
    """The (node id, host, port) a DescribeCluster v0 response frame names."""
    from kinspect.wire.headers import parse_response_header
    from kinspect.wire.messages import decode_body
    header = parse_response_header(frame, 1, 4)
    body, problems = decode_body(DESCRIBE_CLUSTER, 0, "response", frame, start=4 + header[1])
    assert not problems, problems
    return [(b["broker_id"], b["host"], b["port"]) for b in body["brokers"]]


def read_frame(sock) -> bytes:
    head = read_exactly(sock, 4)
    return head + read_exactly(sock, struct.unpack(">i", head)[0])


def read_exactly(sock, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def metadata_brokers(frame: bytes) -> list[tuple[int, str, int]]:
    """The (node id, host, port) a Metadata v12 response frame names."""
    from kinspect.wire.headers import parse_response_header
    from kinspect.wire.messages import decode_body
    header = parse_response_header(frame, 1, 4)
    body, problems = decode_body(METADATA, METADATA_VERSION, "response", frame, start=4 + header[1])
    assert not problems, problems
    return [(b["node_id"], b["host"], b["port"]) for b in body["brokers"]]


class CraftedBroker:
    def __init__(self, brokers=(), host: str = "127.0.0.1", ssl=None, close_after_answer: bool = False,
                 sink: bool = False):
        self.sink = sink  # read and count every byte, answer nothing (a flood is read at once)
        # api key -> (api version, correlation id) -> the raw bytes to answer with, then close
        self.raw: dict[int, object] = {}
        self.ssl = ssl  # an SSLContext: the broker speaks TLS
        self.close_after_answer = close_after_answer  # the broker ends each connection after one answer
        self.brokers = list(brokers)
        self.cluster_brokers: list | None = None  # DescribeCluster's, when not the same
        self.host = host
        self.received = 0
        self.connections = 0
        self.address: tuple[str, int] | None = None
        self._cached: tuple = (None, None)
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> "CraftedBroker":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._started.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def bootstrap(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._client, self.host, 0, limit=1 << 24, backlog=4096, ssl=self.ssl)
        self.address = server.sockets[0].getsockname()[:2]
        self._started.set()
        await self._stop.wait()
        server.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.sink:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    return
                self.received += len(chunk)
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                if size <= 0:  # not Kafka framing: read on, answer nothing
                    self.received += 4 + len(await reader.read(1 << 16))
                    continue
                payload = await reader.readexactly(size)
                self.received += 4 + size
                header = parse_request_header(payload)
                if header is None:
                    continue
                raw = self.raw.get(header.api_key)
                if raw is not None:
                    writer.write(raw(header.api_version, header.correlation_id))
                    await writer.drain()
                    break
                answer = self.answer(header.api_key, header.api_version, header.correlation_id)
                if answer is not None:
                    writer.write(answer)
                    await writer.drain()
                    if self.close_after_answer:
                        break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # cancelled: the server stops (asyncio.run's end), quietly
        finally:
            writer.close()

    def answer(self, api_key: int, api_version: int, correlation_id: int) -> bytes | None:
        if api_key == API_VERSIONS:
            return response_frame(API_VERSIONS, 0, correlation_id, {"error_code": 0, "api_keys": [
                {"api_key": API_VERSIONS, "min_version": 0, "max_version": 3},
                {"api_key": METADATA, "min_version": 0, "max_version": METADATA_VERSION}]})
        if api_key == METADATA:
            brokers = self.brokers
            if self._cached[:2] != (id(brokers), api_version):  # 100,000 brokers take a second to encode
                self._cached = (id(brokers), api_version, encode_body(METADATA, api_version, "response",
                                                                       metadata_body(brokers)), brokers)
            payload = struct.pack(">i", correlation_id) + (b"\x00" if api_version >= 9 else b"") + self._cached[2]
            return struct.pack(">i", len(payload)) + payload
        if api_key == DESCRIBE_CLUSTER:
            brokers = self.brokers if self.cluster_brokers is None else self.cluster_brokers
            return response_frame(DESCRIBE_CLUSTER, 0, correlation_id, {
                "error_code": 0, "cluster_id": "crafted", "controller_id": -1,
                "brokers": [{"broker_id": n, "host": h, "port": p, "rack": None} for n, h, p in brokers]})
        return None
