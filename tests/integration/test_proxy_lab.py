"""kinspect proxy between real clients and a real broker (issue 13's tests), on loopback.

A Tansu broker; the proxy in front of it with its listeners; librdkafka (every codec),
kafka-python and aiokafka bootstrapping to the proxy only. What each consumes must be what it
produced; the proxy's decoded exchanges must be `kinspect decode` of a tcpdump capture of the
client-side traffic (every field but the times); the capture must show no client connection to
the broker's own port. Then the faults: the broker killed mid-stream, a client killed in the
middle of a request, and Ctrl-C with requests in flight.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
import random
import re
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from kinspect.wire.encode import encode_request
from tests.lab.kinspect_child import KINSPECT, REPO, KinspectChild, json_lines
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder
from tests.lab.runner import run_client
from tests.lab.tansu import TansuBroker

pytestmark = pytest.mark.lab

LISTENING = re.compile(r"kinspect: listening on \S+:(\d+)")
# what a proxy's decode and a capture's may differ in: times, and the capture's frame numbers
TIMING = ("request_time", "response_time", "latency_ms", "time", "request_frames", "response_frames")


def _ephemeral_ports() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def free_base(span: int = 256) -> int:
    """A port BASE with BASE..BASE+span all free on 127.0.0.1 (a broker N listens on BASE+1+N),
    outside the kernel's ephemeral range: a test opening a thousand connections would otherwise
    hand BASE+1+N to one of them before the proxy binds it, and broker N's address would reach
    the clients unrewritten (the proxy warns and relays it as it came)."""
    rng = random.Random()
    low, high = _ephemeral_ports()
    spans = [(start, stop - span) for start, stop in ((10000, low), (high + 1, 65536)) if stop - span > start]
    for _ in range(200):
        start, stop = rng.choice(spans)
        base = rng.randrange(start, stop)
        socks = []
        try:
            for port in range(base, base + span):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


class Proxy(KinspectChild):
    """kinspect proxy as a child; start() returns once it listens."""

    def __init__(self, args, env=None):
        super().__init__("proxy", args, LISTENING, env)

    @property
    def port(self) -> int:
        return int(self.ready_match.group(1))


_json_lines = json_lines


def _untimed(records) -> list[str]:
    return sorted(json.dumps({k: v for k, v in r.items() if k not in TIMING}, sort_keys=True)
                  for r in records if r["type"] == "exchange")


def _client_side(proxied: list[dict], captured: list[dict]) -> list[dict]:
    """The capture's exchanges, where one a client closed before its response reached it (the
    proxy still read that response from the broker, so it decodes it) takes the proxy's answer:
    the request must be the same, and at most one such exchange per connection (its last)."""
    answers = {(r["conn"], r["correlation_id"]): r for r in proxied if r["type"] == "exchange"}
    out, late = [], Counter()
    for r in captured:
        if r["type"] == "exchange" and r["response"] is None:
            answered = answers.get((r["conn"], r["correlation_id"]))
            if answered is not None and answered["response"] is not None:
                assert answered["request"] == r["request"]
                late[r["conn"]] += 1
                r = answered
        out.append(r)
    assert all(n == 1 for n in late.values()), late
    return out


def _decode(path: Path) -> list[dict]:
    out = subprocess.run([*KINSPECT, "decode", "--json", "-j1", str(path)], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return _json_lines(out.stdout)


@pytest.fixture(scope="module")
def broker():
    require_lab_host()
    with TansuBroker() as b:
        yield b


def _clients(bootstrap: str, label: str) -> list[dict]:
    return [
        run_client("librdkafka_client", ["--bootstrap", bootstrap, "--codecs", "none,gzip,snappy,lz4,zstd",
                                         "--count", "3", "--value-size", "3000", "--label", f"{label}-rdk"]),
        run_client("kafka_python_client", ["--bootstrap", bootstrap, "--codecs", "none,gzip", "--count", "3",
                                           "--label", f"{label}-kp"]),
        run_client("aiokafka_client", ["--bootstrap", bootstrap, "--codecs", "none,lz4", "--count", "3",
                                       "--label", f"{label}-aio"]),
    ]


def test_real_clients_through_the_proxy_get_their_values_and_the_proxy_decodes_what_tcpdump_saw(broker, tmp_path):
    base = free_base()
    # the proxy's ports only: other Kafka traffic on this machine's loopback (a KRaft broker's
    # heartbeats, say) is none of this test's
    recorder = Recorder(tmp_path / "clients.pcap", "lo", f"tcp portrange {base}-{base + 255}")
    with recorder:
        proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"]).start()
        manifests = _clients(f"127.0.0.1:{base}", "proxy")
        code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    for manifest in manifests:
        produced = sorted(p["value"] for p in manifest["produced"] if p["delivered"])
        assert len(produced) == len(manifest["produced"]) > 0
        assert sorted(c["value"] for c in manifest["consumed"]) == produced, manifest["notes"]
    records = _json_lines(out)
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert len(exchanges) > 50
    proxied, captured = _untimed(exchanges), _untimed(_client_side(exchanges, _decode(recorder.output)))
    assert proxied == captured, ([r[:300] for r in proxied if r not in captured],
                                 [r[:300] for r in captured if r not in proxied])
    # every connection a client made was to one of the proxy's ports, none to the broker's
    ports = {int(r["conn"].rsplit(":", 1)[1]) for r in exchanges}
    assert broker.port not in ports and base in ports and len(ports) == 2
    # every Metadata response names the proxy, and the broker's address never reaches a client
    # (a request a client sends as the proxy stops goes out unanswered: it names nothing)
    answered = [r for r in exchanges if r["api_name"] == "Metadata" and r["response"]]
    assert answered
    for r in answered:
        assert {(b["host"], b["port"]) for b in r["response"]["brokers"]} <= {("127.0.0.1", p) for p in ports}
    assert f":{broker.port}" not in json.dumps([r["response"] for r in exchanges])
    # the values went through the proxy decoded, in Produce requests and Fetch responses
    text = json.dumps(exchanges)
    assert all(p["value"] in text for m in manifests for p in m["produced"])
    assert records[-1]["kind"] == "proxy" and records[-1]["skipped_bytes"] == 0
    assert any(re.search(r"responses rewritten, 0 that named brokers relayed unchanged", line) for line in proxy.stderr)
    assert not any("Traceback" in line for line in proxy.stderr)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def test_no_rewrite_relays_every_byte_unchanged(broker):
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--no-rewrite", "--json"]).start()
    # the decoder is the relay's one child, and yields the CPU to it (nice 10, SCHED_IDLE)
    decoders = _decoders(proxy)
    assert len(decoders) == 1 and _stat(decoders[0])[16] == "10" and _stat(proxy.process.pid)[16] == "0"
    assert os.sched_getscheduler(decoders[0]) == os.SCHED_IDLE
    assert os.sched_getscheduler(proxy.process.pid) == os.SCHED_OTHER
    with socket.create_connection(("127.0.0.1", base)) as s:
        s.sendall(encode_request(3, 12, 1, "raw", {"topics": None, "allow_auto_topic_creation": False}))
        response = _read_frame(s)
    code, out = proxy.stop()
    assert code == 0
    assert f"{broker.host}".encode() in response and struct.pack(">i", broker.port) in response
    exchange = _json_lines(out)[0]
    assert exchange["response"]["brokers"][0]["port"] == broker.port


def _decoders(proxy) -> list[int]:
    """The relay's children: its one decoder process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if _stat(int(stat.parent.name))[1] == str(proxy.process.pid):
                found.append(int(stat.parent.name))
        except OSError:  # a process of the machine's that ended meanwhile
            continue
    return found


def test_a_dead_decoder_costs_the_relay_nothing_and_the_exit_code_says_so(broker):
    """Hostile to the decoder (the OOM killer, a signal): the relay goes on relaying, and the run
    ends with exit 4 and one line saying the decoded output stops short."""
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"]).start()
    (decoder,) = _decoders(proxy)
    request = encode_request(3, 12, 1, "raw", {"topics": None, "allow_auto_topic_creation": False})
    with socket.create_connection(("127.0.0.1", base)) as s:
        s.sendall(request)
        before = _read_frame(s)
        os.kill(decoder, signal.SIGKILL)
        for correlation_id in range(2, 200):  # the relay writes on into the dead decoder's pipe
            s.sendall(encode_request(3, 12, correlation_id, "raw", {"topics": None,
                                                                  "allow_auto_topic_creation": False}))
            assert _read_frame(s)[4:8] == struct.pack(">i", correlation_id)
    code, _ = proxy.stop()
    assert before[4:8] == struct.pack(">i", 1)
    assert code == 4
    assert proxy.log_has(r"the decoder process died \(signal 9\)")
    assert not any("Traceback" in line for line in proxy.stderr)


def _read_frame(s: socket.socket) -> bytes:
    head = _read_exactly(s, 4)
    return head + _read_exactly(s, struct.unpack(">i", head)[0])


def _read_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def test_broker_killed_mid_stream_closes_its_clients_and_the_proxy_goes_on(tmp_path):
    require_lab_host()
    doomed = TansuBroker().start()
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", doomed.bootstrap, "--json"]).start()
    try:
        s = socket.create_connection(("127.0.0.1", base), timeout=20)
        s.sendall(encode_request(18, 3, 1, "victim", {"client_software_name": "t", "client_software_version": "1"}))
        _read_frame(s)
        # a request in flight when the broker dies: Fetch with a long max_wait on a missing topic
        # would be answered at once, so just kill the broker and send one more request
        doomed.process.kill()
        doomed.process.wait()
        try:
            s.sendall(encode_request(3, 12, 2, "victim", {"topics": None}))
        except OSError:
            pass
        assert s.recv(100) == b""  # the proxy closed the client's side
        s.close()
        assert proxy.log_has(r"#1 .* closed by broker")
        # a new client: the broker is unreachable, said in one line, the client closed
        with socket.create_connection(("127.0.0.1", base), timeout=20) as again:
            assert again.recv(100) == b""
        assert proxy.log_has(r"#2 .*cannot connect to bootstrap .*; closing the client")
    finally:
        code, out = proxy.stop()
        doomed.stop()
    assert code == 0, "\n".join(proxy.stderr)
    records = _json_lines(out)
    assert [r["api_name"] for r in records if r["type"] == "exchange"][:1] == ["ApiVersions"]
    unanswered = [r for r in records if r["type"] == "exchange" and r["response"] is None]
    assert [r["api_name"] for r in unanswered] in (["Metadata"], [])  # sent before or after the close
    assert not any("Traceback" in line for line in proxy.stderr)


def test_a_client_killed_mid_request_closes_its_broker_connection_and_others_go_on(broker):
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json"]).start()
    request = encode_request(3, 12, 1, "victim", {"topics": None})
    s = socket.create_connection(("127.0.0.1", base), timeout=20)
    s.sendall(request[:len(request) // 2])
    assert proxy.log_has(r"#1 .* connected")
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # RST, as when the process is killed
    assert proxy.log_has(r"#1 .* closed by client")
    with socket.create_connection(("127.0.0.1", base), timeout=20) as other:
        other.sendall(encode_request(3, 12, 1, "survivor", {"topics": None}))
        assert len(_read_frame(other)) > 8
    code, out = proxy.stop()
    assert code == 0
    records = _json_lines(out)
    assert [(r["client_id"], r["response"] is not None) for r in records if r["type"] == "exchange"] == \
        [("survivor", True)]
    notices = [r for r in records if r["type"] == "notice" and r["kind"] != "proxy"]
    assert [(n["kind"], n["what"]) for n in notices] == [
        ("resync", f"stream ended inside a frame ({len(request) // 2} bytes)")], notices
    assert not any("Traceback" in line for line in proxy.stderr)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _fetch(correlation_id: int, topic: str, partitions: int, max_bytes: int) -> bytes:
    return encode_request(1, 4, correlation_id, "slow-reader", {
        "replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": max_bytes, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "fetch_offset": 0, "partition_max_bytes": max_bytes} for p in range(partitions)]}]})


def test_a_consumer_that_stops_reading_keeps_the_relay_memory_flat(broker):
    """Fetches of ~100 MB of records (Tansu answers 5 MB at most each) that the client does not
    read: the relay stops reading the broker while the client's side is full, so its memory stays
    flat; then every byte arrives."""
    import confluent_kafka as ck
    topic = "backpressure"
    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "message.max.bytes": 2 << 20,
                            "batch.size": 1 << 20})
    value = bytes(range(256)) * 4096  # 1 MiB
    for i in range(24):
        producer.produce(topic, value=value, key=str(i).encode())
    assert producer.flush(60) == 0
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--no-rewrite", "--summary",
                   "--decode-buffer-mb", "8"]).start()
    relay_pid = proxy.process.pid
    s = socket.create_connection(("127.0.0.1", base))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 10)
    requests = 20
    for i in range(requests):
        s.sendall(_fetch(i + 1, topic, 1, 64 << 20))
    time.sleep(2)  # the broker answers; the client reads nothing
    before = _rss_kb(relay_pid)
    time.sleep(3)
    after = _rss_kb(relay_pid)
    # read everything now: every response whole
    sizes = []
    for _ in range(requests):
        frame = _read_frame(s)
        sizes.append(len(frame))
    s.close()
    code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr)
    assert min(sizes) > 4 << 20 and sum(sizes) > 80 << 20, sizes  # nothing lost while the relay waited
    assert after - before < 8 << 10, (before, after)  # flat: under 8 MB more while the client stalled
    assert after < 200 << 10, after
    assert re.search(r"^Fetch\s", out, re.M)


def test_a_thousand_concurrent_connections_all_answered(broker):
    import selectors
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json", "--quiet"]).start()
    n = 1000
    socks = [socket.create_connection(("127.0.0.1", base), timeout=30) for _ in range(n)]
    selector = selectors.DefaultSelector()
    buffers = {}
    for i, s in enumerate(socks):
        s.sendall(encode_request(18, 0, 1, f"c{i}", {}) + encode_request(3, 1, 2, f"c{i}", {"topics": []}))
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ, i)
        buffers[i] = b""
    done = set()
    deadline = time.monotonic() + 120
    while len(done) < n and time.monotonic() < deadline:
        for key, _ in selector.select(1):
            i = key.data
            chunk = key.fileobj.recv(65536)
            buffers[i] += chunk
            frames, pos, data = [], 0, buffers[i]
            while len(data) - pos >= 4 and len(data) - pos >= 4 + struct.unpack_from(">i", data, pos)[0]:
                size = struct.unpack_from(">i", data, pos)[0]
                frames.append(data[pos + 4:pos + 4 + size])
                pos += 4 + size
            if len(frames) == 2 or not chunk:
                selector.unregister(key.fileobj)
                done.add(i)
                assert [struct.unpack_from(">i", f)[0] for f in frames] == [1, 2], (i, frames)
                assert struct.pack(">i", broker.port) not in frames[1]  # the address was rewritten
    rss = _rss_kb(proxy.process.pid)
    for s in socks:
        s.close()
    code, out = proxy.stop()
    assert code == 0, "\n".join(proxy.stderr[-20:])
    assert len(done) == n
    exchanges = [r for r in _json_lines(out) if r["type"] == "exchange"]
    assert len(exchanges) == 2 * n and all(r["response"] is not None for r in exchanges)
    assert len({r["conn"] for r in exchanges}) == n
    assert rss < 250 << 10, rss  # the relay's memory for 2,000 sockets


DRAINING = re.compile(r"stopping: no new connections, no new requests; draining (\d+) in-flight requests "
                      r"\((\d+) half read\)")
DRAINED = re.compile(r"drained in ([\d.]+) s: (\d+) responses relayed, (\d+) requests cut \(no response within "
                     r"--drain-timeout\), (\d+) cut half read; (\d+) bytes of new requests not forwarded")


def test_sigterm_under_a_busy_producer_drains_what_was_forwarded_and_forwards_nothing_new(broker):
    """A librdkafka producer sending 3,000 requests a second (linger 0) when SIGTERM comes: the
    proxy reads no new request, every request it forwarded gets its response relayed, and it
    exits without waiting out --drain-timeout (before, the producer's new requests kept the
    in-flight count above zero until the timeout cut them)."""
    import sys
    base = free_base()
    proxy = Proxy(["--listen", f"127.0.0.1:{base}", "--upstream", broker.bootstrap, "--json",
                   "--drain-timeout", "30"]).start()
    load = subprocess.Popen([sys.executable, "-m", "tests.bench.proxy_load", "--bootstrap", f"127.0.0.1:{base}",
                             "--topic", "draining", "--size", "1024", "--seconds", "60", "--rate", "3000"],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert proxy.log_has(r"#2 .* connected", 30)  # the bootstrap, then the broker's own listener
        time.sleep(2)
        code, out = proxy.stop(signal.SIGTERM)
    finally:
        load.kill()
        load.wait()
    assert code == 0, "\n".join(proxy.stderr)
    log = "\n".join(proxy.stderr)
    in_flight, half_read = map(int, DRAINING.search(log).groups())
    seconds, answered, cut, half_cut, _dropped = DRAINED.search(log).groups()
    assert int(cut) == int(half_cut) == 0, log
    assert in_flight <= int(answered) <= in_flight + half_read  # nothing read after the stop but a request's end
    assert float(seconds) < 30
    records = _json_lines(out)
    produce = [r for r in records if r["type"] == "exchange" and r["api_name"] == "Produce"]
    assert len(produce) > 1000
    assert all(r["response"] is not None for r in produce)  # every one forwarded was answered
    assert records[-1]["kind"] == "proxy" and records[-1]["skipped_bytes"] == 0
    assert not any("Traceback" in line for line in proxy.stderr)
