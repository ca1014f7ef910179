"""The relay in process, on loopback: both sockets of a link send small frames at once (Nagle off:
asyncio leaves it on for accepted sockets, and a paced producer's responses then waited for its
delayed ACK); bytes pass both ways unchanged; a half-close is passed on. Each case runs on the
asyncio links and on the C pump (pump.py), its twin, where it is built."""

import asyncio
import os
import socket

import pytest

from kinspect.proxy.relay import Options, Proxy
from tests.unit.native import needs_c

# the asyncio links, the C pump (built in CI: test_v2records.py asserts it; KINSPECT_PURE_PYTHON=1 leaves it out)
RELAYS = [False, pytest.param(True, marks=needs_c)]


async def _relay_case(native: bool):
    got = []
    accepted = asyncio.get_running_loop().create_future()

    async def broker(reader, writer):
        accepted.set_result(writer)
        data = await reader.read(100)
        got.append(data)
        writer.write(b"answer")
        await writer.drain()
        got.append(await reader.read(100))  # b"": the client's half-close was passed on
        writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    upstream = server.sockets[0].getsockname()[:2]
    logs = []
    proxy = Proxy(Options(upstream=upstream, listen_host="127.0.0.1", base_port=0, advertised_host="127.0.0.1",
                          rewrite=False, native=native), None, logs.append)
    await proxy.start()
    assert (proxy.pump is not None) == native
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    writer.write(b"hello")
    await writer.drain()
    await accepted
    answer = await reader.read(100)
    link = next(iter(proxy.links.values()))
    if native:  # the pump's sockets, read through duplicates of their descriptors
        nodelay = []
        for fd in link.fds:
            with socket.socket(fileno=os.dup(fd)) as sock:
                nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    else:
        nodelay = [side.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                   for side in (link.client, link.server)]
    writer.write_eof()
    rest = await reader.read(100)
    writer.close()
    await asyncio.wait_for(proxy.idle.wait(), 5)
    await proxy.drain(1)
    server.close()
    return got, answer, rest, nodelay, logs


@pytest.mark.parametrize("native", RELAYS)
def test_relay_passes_bytes_and_half_closes_with_nagle_off(native):
    got, answer, rest, nodelay, logs = asyncio.run(_relay_case(native))
    assert got == [b"hello", b""] and answer == b"answer" and rest == b""
    assert nodelay == [1, 1]
    assert any("connected" in line for line in logs) and any("closed by client" in line for line in logs)


async def _drain_case(native: bool):
    """A broker that answers each whole request after 0.2 s; a client with one request sent, one
    half sent when the proxy starts draining, then the rest of it and a third in one write."""
    import struct

    from kinspect.wire.encode import encode_request

    received_frames: list[bytes] = []

    async def broker(reader, writer):
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                payload = await reader.readexactly(size)
                received_frames.append(payload)
                await asyncio.sleep(0.2)
                writer.write(struct.pack(">ii", 4, struct.unpack_from(">i", payload, 4)[0]))
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    logs = []
    proxy = Proxy(Options(upstream=server.sockets[0].getsockname()[:2], listen_host="127.0.0.1", base_port=0,
                          advertised_host="127.0.0.1", rewrite=False, native=native), None, logs.append)
    await proxy.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    first, second, third = (encode_request(18, 3, i, "c", {"client_software_name": "x" * 2000,
                                                          "client_software_version": "1"}) for i in (1, 2, 3))
    writer.write(first + second[:1000])
    await writer.drain()
    link = None
    while link is None or link.requests.frames < 1 or not link.requests.mid_frame:
        await asyncio.sleep(0.01)
        link = next(iter(proxy.links.values()), None)
    draining = asyncio.ensure_future(proxy.drain(5))
    await asyncio.sleep(0.05)
    writer.write(second[1000:] + third)
    await writer.drain()
    answers = []
    report = await draining
    while len(answers) < 3:
        frame = await reader.read(8)
        if not frame:
            break
        answers.append(struct.unpack(">ii", frame)[1])
    writer.close()
    server.close()
    return received_frames, answers, report, [first, second, third], logs


@pytest.mark.parametrize("native", RELAYS)
def test_draining_forwards_the_request_under_way_and_no_new_one(native):
    frames, answers, report, sent, logs = asyncio.run(_drain_case(native))
    assert frames == [sent[0][4:], sent[1][4:]]  # the half-read one completed, the third never sent
    assert answers == [1, 2]                      # both answered before the links closed
    # in flight: the first and the second, whose header had come; half read: the second
    assert (report.in_flight, report.half_read, report.answered, report.cut, report.half_cut) == (2, 1, 2, 0, 0)
    assert report.not_forwarded == len(sent[2])
    assert any(line.startswith("drained in") and "2 responses relayed, 0 requests cut" in line for line in logs)


async def _early_case():
    """uvloop (0.23) delivers a chunk after connection_made even though the client's side was
    paused there; the broker connects late (0.2 s): the chunk goes first, then the rest."""
    got = bytearray()

    async def broker(reader, writer):
        while len(got) < 10:
            chunk = await reader.read(100)
            if not chunk:
                break
            got.extend(chunk)
        writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    proxy = Proxy(Options(upstream=server.sockets[0].getsockname()[:2], listen_host="127.0.0.1", base_port=0,
                          advertised_host="127.0.0.1", rewrite=False, native=False), None, lambda line: None)
    await proxy.start()
    create_connection = proxy.loop.create_connection

    async def late(*args, **kwargs):
        await asyncio.sleep(0.2)
        return await create_connection(*args, **kwargs)

    proxy.loop.create_connection = late
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    while not proxy.links:
        await asyncio.sleep(0.01)
    link = next(iter(proxy.links.values()))
    link.client.data_received(b"early")  # as uvloop's first read
    writer.write(b"later")
    await writer.drain()
    for _ in range(100):
        if len(got) >= 10:
            break
        await asyncio.sleep(0.02)
    writer.close()
    await proxy.drain(1)
    server.close()
    return bytes(got)


def test_a_chunk_read_before_the_broker_connects_is_relayed_first():
    assert asyncio.run(_early_case()) == b"earlylater"
