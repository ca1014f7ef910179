"""SIGTERM honours --drain-timeout whatever the decoder's backlog (issue 30, item 7), against a real
proxy process, a real client socket and a small real server that reads everything and answers
nothing (a broker cannot be made to swallow a flood as fast).

A client floods the proxy: zero-size frames (the issue's 8.9 KB .pcap.gz of zeros, made live), or
two million tiny requests (ListGroups v0, 15 bytes each: each one is work for the relay, which
follows every frame, and for the decoder, which decodes each). Before, the relay handled its copies
of the flood in one callback and saw SIGTERM only after them (10-17 s on a busy machine), then
waited for the decoder to decode its whole backlog (a minute for 60 MiB of zeros with
--drain-timeout 2). Now the relay turns between slices of copies, drops what the decoder has not
taken when --drain-timeout ends (counted, in the last lines), and tells the decoder to finish.
The bound asserted is a hang timeout, far above what the stop takes (a few seconds).
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from kinspect.wire.encode import encode_request
from tests.integration.test_proxy_lab import Proxy, free_base
from tests.lab.kinspect_child import KINSPECT, REPO
from tests.unit.proxy.crafted import CraftedBroker

HANG = 40  # seconds: a stop that takes this long has waited for the backlog
FLOODS = {
    "zero-size-frames": lambda: bytes(1 << 20),
    "tiny-requests": lambda: encode_request(16, 0, 1, "c", {}) * ((1 << 20) // 15),
}


def _flood(port: int, kind: str, mib: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    chunk = FLOODS[kind]()
    for _ in range(mib):
        s.sendall(chunk)
    return s


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_sigterm_ends_within_the_drain_timeout_whatever_the_decoders_backlog(kind):
    with CraftedBroker(sink=True) as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json",
                       "--drain-timeout", "1"]).start()
        client = _flood(base, kind, 60 if kind == "zero-size-frames" else 30)
        time.sleep(1)
        proxy.process.send_signal(signal.SIGTERM)
        code, out = proxy.wait(HANG)  # raises TimeoutExpired on a hang
        client.close()
    assert code == 0, "\n".join(proxy.stderr)
    log = "\n".join(proxy.stderr)
    assert "Traceback" not in log
    records = [json.loads(line) for line in out.splitlines()]  # whole lines only: the decoder finished
    assert records[-1]["kind"] == "proxy"
    dropped = re.search(r"decoding skipped 0 bytes, and (\d+) more waiting for the decoder when --drain-timeout "
                        r"ended", log)
    left = records[-1]["left_bytes"]
    assert (int(dropped.group(1)) if dropped else 0) + left > 0, log  # the backlog was cut, and counted


def test_a_decoder_whose_output_nobody_reads_is_killed_after_the_grace_time():
    """stdout is a pipe nobody reads: the decoder blocks writing, and can never finish. Before, the
    relay waited for it for ever after SIGTERM."""
    with CraftedBroker(sink=True) as broker:
        base = free_base()
        process = subprocess.Popen([*KINSPECT, "proxy", "--listen", f"127.0.0.1:{base}", "--upstream",
                                    broker.bootstrap, "--json", "--drain-timeout", "1"], cwd=REPO,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert "open files" in process.stderr.readline()
            assert "listening on" in process.stderr.readline()
            client = _flood(base, "tiny-requests", 10)
            time.sleep(2)
            process.send_signal(signal.SIGTERM)
            err = _stderr_only(process)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        client.close()
    assert process.returncode == 4, err
    assert "the decoder did not finish within 5 s of --drain-timeout's end and was killed" in err
    assert "Traceback" not in err


def _stderr_only(process: subprocess.Popen) -> str:
    """stderr to its end, stdout never read; the process must end within HANG seconds."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    process.wait(HANG)
    reader.join(10)
    return "".join(lines)


def test_repeated_notices_of_one_connection_are_folded_in_the_proxys_output():
    """262,144 zero-size frames from one client, all decoded (a generous --drain-timeout): the
    proxy's output is decode's, folded (kinspect/wire: a few notices shown, then one with the
    count), not one notice per frame (127 MB for the issue's 8.9 KB capture)."""
    with CraftedBroker(sink=True) as broker:
        base = free_base()
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json",
                       "--drain-timeout", "120"]).start()
        with socket.create_connection(("127.0.0.1", base), timeout=60) as client:
            client.sendall(bytes(1 << 20))
        deadline = time.monotonic() + 60
        while broker.received < 1 << 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        code, out = proxy.stop(signal.SIGTERM, timeout=180)
    assert code == 0, "\n".join(proxy.stderr)
    records = [json.loads(line) for line in out.splitlines()]
    notices = [r for r in records if r["type"] == "notice" and r["kind"] != "proxy"]
    assert records[-1]["left_bytes"] == 0  # everything was decoded
    assert len(notices) <= 20, len(notices)
    assert {r["kind"] for r in notices} == {"undecodable"}
    assert sum(r.get("more") or 1 for r in notices) == 1 << 18  # every frame counted
