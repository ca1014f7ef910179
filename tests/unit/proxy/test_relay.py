"""The relay in process, on loopback: both sockets of a link send small frames at once (Nagle off:
asyncio leaves it on for accepted sockets, and a paced producer's responses then waited for its
delayed ACK); bytes pass both ways unchanged; a half-close is passed on."""

import asyncio
import socket

from kinspect.proxy.relay import Options, Proxy


async def _relay_case():
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
                          rewrite=False), None, logs.append)
    await proxy.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    writer.write(b"hello")
    await writer.drain()
    await accepted
    answer = await reader.read(100)
    link = next(iter(proxy.links.values()))
    nodelay = [side.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
               for side in (link.client, link.server)]
    writer.write_eof()
    rest = await reader.read(100)
    writer.close()
    await asyncio.wait_for(proxy.idle.wait(), 5)
    await proxy.drain(1)
    server.close()
    return got, answer, rest, nodelay, logs


def test_relay_passes_bytes_and_half_closes_with_nagle_off():
    got, answer, rest, nodelay, logs = asyncio.run(_relay_case())
    assert got == [b"hello", b""] and answer == b"answer" and rest == b""
    assert nodelay == [1, 1]
    assert any("connected" in line for line in logs) and any("closed by client" in line for line in logs)
