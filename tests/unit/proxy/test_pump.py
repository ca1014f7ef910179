"""The C pump (kinspect/proxy/pump.py, native/_relay.c) against its twin, the asyncio links, on
loopback: real clients' connections from the committed captures, and hand-built SASL v0 sessions,
are replayed through a proxy of each kind, rewriting on. The broker's bytes go in pieces of 1-9
bytes and whole, with pauses, so that heads and frames split across reads. The broker must receive
the client's bytes exactly, and the client the same bytes from both relays (addresses rewritten
alike); the pump's log and counts must say what the asyncio links' say."""

from __future__ import annotations

import asyncio
import random

import pytest

from kinspect.proxy.relay import Options, Proxy
from tests.integration.test_proxy_lab import free_base
from tests.unit.proxy.streams import connections
from tests.unit.proxy.test_frames import SCRAM_CLIENT, SCRAM_SERVER, _sasl_v0_session
from tests.unit.native import needs_c

pytestmark = needs_c  # every test here is the C module against its twin


CAPTURES = [("librdkafka-produce-consume.pcapng", 42347), ("kafka41-librdkafka-mtu1500.pcap", 9092),
            ("java-transactions.pcap", 9092), ("kafka39-legacy.pcap", 46645), ("aiokafka-mtu1500.pcapng", 9092),
            ("java-console-consumer-kip848.pcap", 9092), ("kafka-python-legacy-groups.pcapng", 9092)]


def _pieces(data: bytes, rng: random.Random):
    pos = 0
    while pos < len(data):
        n = rng.choice((1, 2, 3, 7, 8, 9, 1500, 1 << 20))
        yield data[pos:pos + n]
        pos += n


async def _replay(events: list, native: bool, base: int, seed: int) -> dict:
    """One connection's (direction, bytes) through a fresh proxy; what each end received."""
    rng = random.Random(seed)
    client_bytes = b"".join(data for direction, data in events if direction == 1)
    at_broker = bytearray()
    done = asyncio.get_running_loop().create_future()

    async def broker(reader, writer):
        try:
            need = 0
            for direction, data in events:
                if direction == 1:
                    need += len(data)
                    continue
                while len(at_broker) < need:  # answer only what the client has sent
                    chunk = await reader.read(1 << 16)
                    if not chunk:
                        break
                    at_broker.extend(chunk)
                for piece in _pieces(data, rng):
                    writer.write(piece)
                    await writer.drain()
                    if rng.random() < 0.3:
                        await asyncio.sleep(0.001)  # a read of its own at the relay
            while chunk := await reader.read(1 << 16):
                at_broker.extend(chunk)
            writer.close()
        finally:
            done.set_result(None)

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    logs: list[str] = []
    proxy = Proxy(Options(upstream=server.sockets[0].getsockname()[:2], listen_host="127.0.0.1", base_port=base,
                          advertised_host="127.0.0.1", native=native), None, logs.append)
    await proxy.start()
    assert (proxy.pump is not None) == native
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    writer.write(client_bytes)
    await writer.drain()
    writer.write_eof()
    at_client = bytearray()
    while chunk := await asyncio.wait_for(reader.read(1 << 16), 20):
        at_client.extend(chunk)
    writer.close()
    await asyncio.wait_for(done, 20)
    await asyncio.wait_for(proxy.idle.wait(), 10)
    await proxy.drain(1)
    server.close()
    counters = proxy.counters
    return {"at_broker": bytes(at_broker), "at_client": bytes(at_client), "client_bytes": client_bytes,
            "counts": (counters.connections, counters.client_bytes, counters.server_bytes, counters.rewritten,
                       counters.unchanged),
            "closed": [line.split(": ", 1)[1].split(" after ")[0] for line in logs if "closed by" in line]}


def _twins(events: list, seed: int) -> None:
    base = free_base(16)
    c, py = (asyncio.run(_replay(events, native, base, seed)) for native in (True, False))
    assert c["at_broker"] == py["at_broker"] == c["client_bytes"]
    assert c["at_client"] == py["at_client"]
    assert c["counts"] == py["counts"]
    assert c["closed"] == py["closed"] == ["closed by client (end of stream)"]


def _real_connections():
    out = []
    for name, port in CAPTURES:
        for flow, conn in connections(name, port).items():
            out.append(pytest.param([(d, data) for d, _ts, data in conn["events"]], id=f"{name}-{flow[1]}"))
    return out


@pytest.mark.parametrize("events", _real_connections())
def test_the_pump_relays_real_connections_as_its_asyncio_twin_does(events):
    _twins(events, seed=len(events))


@pytest.mark.parametrize("mechanism,client_tokens,server_tokens", [
    ("PLAIN", [b"\x00alice\x00alice-pw"], [b""]),
    ("SCRAM-SHA-512", SCRAM_CLIENT, SCRAM_SERVER),
])
def test_after_a_sasl_v0_handshake_the_pump_hands_responses_over_as_its_twin_follows_them(
        mechanism, client_tokens, server_tokens):
    for seed in range(3):
        _twins(_sasl_v0_session(mechanism, client_tokens, server_tokens), seed)


def test_a_stream_that_is_not_kafka_passes_both_ways_without_stalling():
    _twins([(1, b"hello"), (2, b"answer"), (1, b"\x00\x00\x00\x00more"), (2, b"\xff" * 3)], seed=0)


def test_hostile_bytes_pass_as_the_twin_passes_them_with_memory_bounded():
    """A Metadata response that claims 2 GiB (past --max-held-mb: passed on unheld, never
    allocated), then twenty thousand tiny frames each way."""
    import struct

    from kinspect.wire.encode import encode_request
    lying = struct.pack(">ii", 0x7FFFFFFF, 1) + b"\x00" * 5000
    tiny_requests = b"".join(struct.pack(">ihhi", 8, 18, 0, i) for i in range(2, 20_002))
    tiny_responses = b"".join(struct.pack(">ii", 4, i) for i in range(20_000))
    _twins([(1, encode_request(3, 1, 1, "c", {"topics": None})), (2, lying), (1, tiny_requests),
            (2, tiny_responses)], seed=1)
