"""The relay's connect to a broker on a busy loop (proxy/relay.py's connected): only the TCP
connect is timed. Timing create_connection whole (a thread's getaddrinfo, then the connect, then
the transport, each a turn of the loop) made a connect that had succeeded time out when the loop's
turns were long: 40 clients flooding tiny requests through the asyncio links closed 2-16 of 40
new clients as "timed out". Here the loop is kept busy for 1.5 s right after the client connects,
with a connect timeout of 1 s, against a real listening socket on loopback."""

import asyncio
import socket
import time

from kinspect.proxy.relay import Options, Proxy


async def _busy_case(native: bool):
    broker = socket.socket()
    broker.bind(("127.0.0.1", 0))
    broker.listen(8)
    logs = []
    proxy = Proxy(Options(upstream=broker.getsockname()[:2], listen_host="127.0.0.1", base_port=0,
                          advertised_host="127.0.0.1", rewrite=False, native=native, connect_timeout=1.0),
                  None, logs.append)
    await proxy.start()
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.bootstrap_port)
    while not proxy.links:
        await asyncio.sleep(0.001)
    loop.call_soon(time.sleep, 1.5)  # a turn of the loop that takes longer than the timeout
    for _ in range(300):
        if any("connected" in line or "cannot connect" in line for line in logs):
            break
        await asyncio.sleep(0.01)
    writer.close()
    await proxy.drain(1)
    broker.close()
    return logs


def test_a_connect_that_succeeded_is_not_timed_out_by_a_slow_turn_of_the_loop():
    logs = asyncio.run(_busy_case(native=False))
    assert any(line.endswith(": connected") for line in logs), logs
    assert not any("timed out" in line for line in logs), logs
