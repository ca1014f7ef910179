"""kinspect proxy's cost to a real producer (issue 13's benchmark).

One Apache Kafka 4.1.2 broker on loopback; a librdkafka producer (tests/bench/proxy_load.py)
sends 1 KiB or 16 KiB values (acks=1, no compression), direct to the broker, through the proxy
relaying only (--no-decode), and through the proxy decoding (--json, written to /dev/null).
The runs are interleaved (mode inside size inside round) because this shared machine's speed
drifts; an unrecorded direct run of each size warms the broker up first. Each run: an unpaced
throughput run (MB/s of values acknowledged) and a paced one at --rate messages/s (librdkafka's
own per-message latency, p50/p99), each through a fresh proxy; a direct producer at the same
rate runs beside each proxied latency run, so that the proxy's added latency is also taken
against the same moments of the broker and machine (the paired columns); the proxy's CPU (relay
process, and the decoder process when decoding) from /proc over the run; for decoding runs, the
bytes the decoder skipped because it fell behind (the proxy's closing lines); and how many CPUs
the whole machine kept busy meanwhile (it is shared).

Each proxied mode also has a residence run: the same paced producer through a fresh proxy alone,
with tcpdump on lo recording both legs (client to proxy, proxy to broker). `kinspect decode`
pairs each leg's exchanges, and a Produce request's residence is its latency on the client leg
less its latency on the broker leg: the time the proxy added, both ends timestamped by the same
kernel clock, so the broker's pauses (which the end-to-end p99 above cannot separate from the
proxy's) cancel out. Reported: p50, p99 and the largest, over every paced request.

--twin adds the relay's pure-Python twin (asyncio links instead of the C pump), relaying only.
--peer adds a real peer relay, socat (C, one forked process per connection, TCP_NODELAY both
ways), run exactly as the proxy is. socat rewrites no addresses, so the broker gets a second
listener (PEER) that advertises socat's port: a client that bootstraps through socat is told to
produce through it too. socat's residence is then the floor a byte-copying relay in C reaches on
this machine, to read the proxy's against.

    python tests/bench/bench_proxy.py [--seconds 10] [--rounds 2] [--sizes 1024,16384] [--rate 200]
                                      [--latency-seconds 20] [--loops asyncio,uvloop] [--peer] [--twin]
                                      [--residence-only]

Writes tests/bench/results/proxy-<date>.json and .md, and prints each run as it ends.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts  # noqa: E402
from tests.integration.test_proxy_lab import free_base  # noqa: E402
from tests.lab.kafka import KafkaBroker, free_port  # noqa: E402

MODES = ["direct", "relay", "decode"]
TICK = os.sysconf("SC_CLK_TCK")
RELAYED = re.compile(r"(\d+) bytes from clients, (\d+) bytes to clients; .* decoding skipped (\d+) bytes")
DECODED = re.compile(r"decoded (\d+) exchanges")


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


class ProxyRun:
    def __init__(self, upstream: str, decode: bool, loop: str | None = None, pure: bool = False):
        self.base = free_base(8)
        args = ["--listen", f"127.0.0.1:{self.base}", "--upstream", upstream, "--quiet"]
        args += ["--json"] if decode else ["--no-decode"]
        env = {**os.environ, "KINSPECT_EVENT_LOOP": loop} if loop else None
        if pure:  # the relay's pure-Python twin (asyncio links), not the C pump
            env = {**(env or os.environ), "KINSPECT_PURE_PYTHON": "1"}
        self.process = subprocess.Popen([sys.executable, "-m", "kinspect", "proxy", *args], cwd=REPO, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        started = threading.Event()

        def pump():
            for line in self.process.stderr:
                self.stderr.append(line.rstrip())
                if "listening on" in line:
                    started.set()
            started.set()

        threading.Thread(target=pump, daemon=True).start()
        if not started.wait(30):
            raise RuntimeError("proxy did not start:\n" + "\n".join(self.stderr))
        time.sleep(0.2)
        self.decoder = next(iter(_children(self.process.pid)), None)

    def cpu(self) -> tuple[float, float]:
        return _cpu(self.process.pid), _cpu(self.decoder) if self.decoder else 0.0

    def stop(self) -> dict:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(120)
        time.sleep(0.2)
        text = "\n".join(self.stderr)
        m = RELAYED.search(text)
        d = DECODED.search(text)
        return {"client_bytes": int(m.group(1)), "server_bytes": int(m.group(2)), "skipped_bytes": int(m.group(3)),
                "exchanges_decoded": int(d.group(1)) if d else None}


class PeerRun:
    """socat relaying ``base`` to the broker's PEER listener (see the module's docstring), with
    ProxyRun's interface; its CPU is the listener's and its forked children's."""

    def __init__(self, base: int, upstream_port: int):
        self.base = base
        self.process = subprocess.Popen(
            ["socat", f"TCP-LISTEN:{base},bind=127.0.0.1,fork,reuseaddr,nodelay",
             f"TCP:127.0.0.1:{upstream_port},nodelay"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.decoder = None
        self.done = 0.0  # CPU of connections already closed (their processes are gone)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run(["ss", "-Hltn", f"sport = :{base}"], capture_output=True, text=True).stdout.strip():
                break
            time.sleep(0.05)

    def cpu(self) -> tuple[float, float]:
        own = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        reaped = (int(own[13]) + int(own[14])) / TICK  # cutime + cstime: children waited for
        return _cpu(self.process.pid) + reaped + sum(_cpu(c) for c in _children(self.process.pid)), 0.0

    def stop(self) -> dict:
        self.process.terminate()
        self.process.wait(30)
        return {"client_bytes": 0, "server_bytes": 0, "skipped_bytes": 0, "exchanges_decoded": None}


def _relay(broker: KafkaBroker, path: str, loop: str | None):
    if path == "socat":
        return PeerRun(broker.peer_base, broker.peer_port)
    if path == "asyncio":
        return ProxyRun(broker.bootstrap, decode=False, loop=loop, pure=True)
    return ProxyRun(broker.bootstrap, decode=path == "decode", loop=loop)


def _load(bootstrap: str, topic: str, size: int, seconds: float, rate: float = 0) -> dict:
    argv = [sys.executable, "-m", "tests.bench.proxy_load", "--bootstrap", bootstrap, "--topic", topic,
            "--size", str(size), "--seconds", str(seconds)]
    if rate:
        argv += ["--rate", str(rate)]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=seconds + 120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _busy() -> float:
    """CPU seconds the whole machine has spent busy so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICK


def one_run(broker: KafkaBroker, mode: str, size: int, seconds: float, rate: float, topic: str,
            latency_seconds: float | None = None) -> dict:
    """The throughput run and the paced latency run, each with a proxy of its own (the latency
    run must not share the CPU with a decoder still working through the throughput run)."""
    row = {"mode": mode, "size": size}
    for kind in ("throughput", "latency"):
        path, _, loop = mode.partition("/")
        proxy = None if path == "direct" else _relay(broker, path, loop or None)
        bootstrap = broker.bootstrap if proxy is None else f"127.0.0.1:{proxy.base}"
        before, busy, t0 = proxy.cpu() if proxy else (0.0, 0.0), _busy(), time.monotonic()
        if kind == "throughput":
            row[kind] = _load(bootstrap, topic, size, seconds)
        else:
            def paced(to: str) -> dict:
                return _load(to, topic, size, latency_seconds or seconds, rate)
            beside: dict = {}
            # a direct producer at the same rate beside a proxied one: the broker's pauses and the
            # machine's drift hit both, so their difference is the proxy's own
            direct = threading.Thread(target=lambda: beside.update(paced(broker.bootstrap))) if proxy else None
            if direct:
                direct.start()
            row[kind] = paced(bootstrap)
            if direct:
                direct.join()
                row[kind]["direct_beside"] = beside
        after, elapsed = proxy.cpu() if proxy else (0.0, 0.0), time.monotonic() - t0
        row[kind]["machine_busy_cpus"] = round((_busy() - busy) / elapsed, 2)
        if proxy:
            row[kind]["relay_cpu"] = round((after[0] - before[0]) / elapsed, 3)  # CPUs over the run
            row[kind]["relay_cpu_s"] = round(after[0] - before[0], 2)
            row[kind]["decoder_cpu"] = round((after[1] - before[1]) / elapsed, 3)
            if proxy.decoder:  # the decoder's backlog: until its CPU time stops growing
                caught_up = time.monotonic()
                last = proxy.cpu()[1]
                while time.monotonic() - caught_up < 120:
                    time.sleep(0.5)
                    now = proxy.cpu()[1]
                    if now - last < 0.02:
                        break
                    last = now
                row[kind]["decoder_cpu_s"] = round(last - before[1], 2)
                row[kind]["decoder_catch_up_s"] = round(time.monotonic() - caught_up - 0.5, 2)
            row[kind]["proxy"] = proxy.stop()
    if mode != "direct":
        t = row["throughput"]
        relayed = t["proxy"]["client_bytes"] + t["proxy"]["server_bytes"]
        t["relay_cpu_ms_per_mb"] = round(t["relay_cpu_s"] * 1000 / (relayed / 1e6), 3) if relayed else None
        row["relay_cpu_share"] = row["throughput"]["relay_cpu"]
        row["decoder_cpu_share"] = row["throughput"]["decoder_cpu"]
        row["proxy"] = row["throughput"]["proxy"]
    return row


def residence(broker: KafkaBroker, mode: str, size: int, seconds: float, rate: float, topic: str) -> dict:
    """The proxy's own added time per paced Produce request, from packet timestamps on lo (see the
    module's docstring)."""
    path, _, loop = mode.partition("/")
    proxy = _relay(broker, path, loop or None)
    broker_port = broker.peer_port if path == "socat" else int(broker.bootstrap.rsplit(":", 1)[1])
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "legs.pcap"
        dump = subprocess.Popen(["tcpdump", "-i", "lo", "-s", "0", "-U", "-n", "-w", str(capture),
                                 f"tcp portrange {proxy.base}-{proxy.base + 7} or tcp port {broker_port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dump.stderr.readline()  # "listening on lo ...": it captures from here
        try:
            _load(f"127.0.0.1:{proxy.base}", topic, size, seconds, rate)
            time.sleep(0.5)
        finally:
            dump.send_signal(signal.SIGINT)
            dump.wait(30)
            proxy.stop()
        ports = [str(p) for p in (broker_port, *range(proxy.base, proxy.base + 8))]
        out = subprocess.run([sys.executable, "-m", "kinspect", "decode", str(capture), "--json", "--api", "Produce",
                              *[a for p in ports for a in ("--port", p)]], cwd=REPO, capture_output=True, text=True)
    client, upstream = [], {}
    for line in out.stdout.splitlines():
        x = json.loads(line)
        if x.get("type") != "exchange" or x.get("response_time") is None:
            continue
        key = (x["correlation_id"], x["request_size"])
        if x["conn"].endswith(f":{broker_port}"):
            upstream.setdefault(key, []).append(x)
        else:
            client.append((key, x))
    added = []
    for key, c in client:  # the broker leg's copy of the request: the same id and size, nearest in time
        b = min(upstream.get(key, []), key=lambda b: abs(b["request_time"] - c["request_time"]), default=None)
        if b is not None and abs(b["request_time"] - c["request_time"]) < 0.5:
            added.append(((c["response_time"] - c["request_time"]) - (b["response_time"] - b["request_time"])) * 1e6)
    added.sort()
    if not added:
        raise RuntimeError(f"no request paired across the proxy: {out.stderr[-1000:]}")
    return {"requests": len(client), "paired": len(added), "p50_us": round(added[len(added) // 2]),
            "p99_us": round(added[math.ceil(len(added) * 0.99) - 1]), "max_us": round(added[-1])}  # nearest rank


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--sizes", default="1024,16384")
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--latency-seconds", type=float, help="the paced runs' length (default: --seconds)")
    p.add_argument("--peer", action="store_true", help="add socat, a C relay, as a peer (see the docstring)")
    p.add_argument("--residence-only", action="store_true", help="only the residence runs (each proxied mode)")
    p.add_argument("--twin", action="store_true", help="add the relay's pure-Python twin (asyncio links, "
                                                       "KINSPECT_PURE_PYTHON=1), relaying only")
    p.add_argument("--loops", help="compare event loops, e.g. asyncio,uvloop: relay and decode runs with each "
                                   "(default: the proxy's own choice)")
    args = p.parse_args()
    modes = MODES if not args.loops else ["direct"] + [f"{m}/{loop}" for loop in args.loops.split(",")
                                                       for m in MODES[1:]]
    modes += (["asyncio"] if args.twin else []) + (["socat"] if args.peer else [])
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    # a run writes tens of GB: the broker keeps 1 GiB a partition (the disk is shared)
    config = {"num.partitions": 1, "auto.create.topics.enable": "true", "log.retention.bytes": 1 << 30,
              "log.segment.bytes": 128 << 20, "log.retention.check.interval.ms": 5000}
    port, controller, peer_port, peer_base = free_port(), free_port(), free_port(), free_base(8)
    if args.peer:  # a second listener, advertising socat's port (see the module's docstring)
        config.update({
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},PEER://127.0.0.1:{peer_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},PEER://127.0.0.1:{peer_base}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,PEER:PLAINTEXT"})
    with KafkaBroker(config=config, port=port) as broker:
        broker.peer_port, broker.peer_base = peer_port, peer_base
        for size in sizes:
            broker.create_topic(f"bench-{size}")
        for size in sizes:  # the broker's JIT warms up on an unrecorded direct run of each size
            _load(broker.bootstrap, f"bench-{size}", size, 2 * args.seconds)
        for round_ in range(args.rounds):
            for size in sizes:
                for mode in modes:
                    if args.residence_only:
                        if mode != "direct":
                            rows.append({"mode": mode, "size": size, "round": round_, "residence": residence(
                                broker, mode, size, args.seconds, args.rate, f"bench-{size}")})
                            print(f"round {round_} {size:>6} B {mode:>6} residence: {rows[-1]['residence']}", flush=True)
                        continue
                    row = one_run(broker, mode, size, args.seconds, args.rate, f"bench-{size}", args.latency_seconds)
                    row["round"] = round_
                    if mode != "direct":
                        row["residence"] = residence(broker, mode, size, args.seconds, args.rate, f"bench-{size}")
                        print(f"round {round_} {size:>6} B {mode:>6} residence: {row['residence']}", flush=True)
                    rows.append(row)
                    t, l_ = row["throughput"], row["latency"]
                    print(f"round {round_} {size:>6} B {mode:>6} (machine {t['machine_busy_cpus']:.1f} CPUs busy): "
                          f"{t['mb_per_s']:7.1f} MB/s "
                          f"({t['msgs_per_s']:8.0f} msg/s)  p50 {l_['p50_us']:7.0f} us  p99 {l_['p99_us']:7.0f} us"
                          + (f"  relay {row['relay_cpu_share']:.2f} CPU, decoder {row['decoder_cpu_share']:.2f} CPU,"
                             f" skipped {row['proxy']['skipped_bytes']} of {row['proxy']['client_bytes']} B"
                             if "proxy" in row else ""), flush=True)
    summary = _residences(rows, sizes, modes) if args.residence_only else _summary(rows, sizes, modes)
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime())
    results = REPO / "tests" / "bench" / "results"
    (results / f"proxy-{stamp}.json").write_text(json.dumps({"args": vars(args), "machine": machine_facts(),
                                                              "rows": rows, "summary": summary}, indent=1))
    (results / f"proxy-{stamp}.md").write_text(_markdown(summary))
    print(_markdown(summary))


def _summary(rows: list[dict], sizes: list[int], modes: list[str]) -> list[dict]:
    out = []
    for size in sizes:
        by = {m: [r for r in rows if r["size"] == size and r["mode"] == m] for m in modes}
        direct_tp = statistics.median(r["throughput"]["mb_per_s"] for r in by["direct"])
        direct_p50 = statistics.median(r["latency"]["p50_us"] for r in by["direct"])
        direct_p99 = statistics.median(r["latency"]["p99_us"] for r in by["direct"])
        for mode in modes:
            rs = by[mode]
            tp = statistics.median(r["throughput"]["mb_per_s"] for r in rs)
            row = {"size": size, "mode": mode, "mb_per_s": round(tp, 1), "ratio": round(tp / direct_tp, 3),
                   # each run against the direct run of its own round
                   "paired_ratios": [round(r["throughput"]["mb_per_s"] / d["throughput"]["mb_per_s"], 3)
                                     for r in rs for d in by["direct"] if d["round"] == r["round"]],
                   "p50_us": round(statistics.median(r["latency"]["p50_us"] for r in rs)),
                   "p99_us": round(statistics.median(r["latency"]["p99_us"] for r in rs))}
            row["added_p50_us"] = row["p50_us"] - round(direct_p50)
            row["added_p99_us"] = row["p99_us"] - round(direct_p99)
            if mode != "direct":  # against the direct producer running beside it, round by round
                paired = [(r["latency"]["p50_us"] - r["latency"]["direct_beside"]["p50_us"],
                           r["latency"]["p99_us"] - r["latency"]["direct_beside"]["p99_us"]) for r in rs]
                row["paired_added_p50_us"] = round(statistics.median(p[0] for p in paired))
                row["paired_added_p99_us"] = round(statistics.median(p[1] for p in paired))
                row["paired_added_p99_range"] = [round(min(p[1] for p in paired)), round(max(p[1] for p in paired))]
                if all("residence" in r for r in rs):  # the proxy's own time, from both legs' packets
                    row["residence_p50_us"] = round(statistics.median(r["residence"]["p50_us"] for r in rs))
                    row["residence_p99_us"] = round(statistics.median(r["residence"]["p99_us"] for r in rs))
                    row["residence_p99_rounds"] = [r["residence"]["p99_us"] for r in rs]
            if mode != "direct":
                row["relay_cpu"] = round(statistics.median(r["relay_cpu_share"] for r in rs), 2)
                row["relay_ms_per_mb"] = round(statistics.median(r["throughput"]["relay_cpu_ms_per_mb"] or 0 for r in rs), 3)
                row["decoder_cpu"] = round(statistics.median(r["decoder_cpu_share"] for r in rs), 2)
                skipped = sum(r["proxy"]["skipped_bytes"] for r in rs)
                total = sum(r["proxy"]["client_bytes"] + r["proxy"]["server_bytes"] for r in rs)
                row["skipped_share"] = round(skipped / total, 3) if total else 0.0
                if mode.startswith("decode"):  # MB decoded per CPU-second of the decoder
                    cpu = sum(r["throughput"]["decoder_cpu_s"] for r in rs)
                    row["decode_mb_per_cpu_s"] = round((total - skipped) / cpu / 1e6, 1) if cpu else None
                    row["busy_cpus"] = round(statistics.median(r["throughput"]["machine_busy_cpus"] for r in rs), 2)
            out.append(row)
    return out


def _residences(rows: list[dict], sizes: list[int], modes: list[str]) -> list[dict]:
    out = []
    for size in sizes:
        for mode in modes[1:]:
            rs = [r["residence"] for r in rows if r["size"] == size and r["mode"] == mode]
            out.append({"size": size, "mode": mode, "residence_p50_us": round(statistics.median(r["p50_us"] for r in rs)),
                        "residence_p99_us": round(statistics.median(r["p99_us"] for r in rs)),
                        "residence_p99_rounds": [r["p99_us"] for r in rs]})
    return out


def _markdown(summary: list[dict]) -> str:
    if summary and "mb_per_s" not in summary[0]:  # --residence-only
        return ("| value size | path | residence p50 µs | residence p99 µs (rounds) |\n|---|---|---:|---:|\n"
                + "\n".join(f"| {r['size']} | {r['mode']} | {r['residence_p50_us']} | {r['residence_p99_us']} "
                             f"({', '.join(map(str, r['residence_p99_rounds']))}) |" for r in summary) + "\n")
    head = ("| value size | path | MB/s | × direct | × direct, round by round | p50 µs | p99 µs | added p50 | added p99 | added p50, p99 "
            "beside direct (p99 range) | relay CPU | "
            "relay CPU ms per MB | decoder CPU | not decoded | decoded MB per decoder CPU-s | residence p50 µs | "
            "residence p99 µs (rounds) |\n"
            "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = [f"| {r['size']} | {r['mode']} | {r['mb_per_s']} | {r['ratio']} | "
             f"{', '.join(f'{x:.2f}' for x in r['paired_ratios'])} | {r['p50_us']} | {r['p99_us']} | "
             f"{r['added_p50_us']} | {r['added_p99_us']} | "
             + (f"{r['paired_added_p50_us']}, {r['paired_added_p99_us']} ({r['paired_added_p99_range'][0]} to "
                f"{r['paired_added_p99_range'][1]})" if "paired_added_p99_us" in r else "-")
             + f" | {r.get('relay_cpu', '-')} | {r.get('relay_ms_per_mb', '-')} | "
             f"{r.get('decoder_cpu', '-')} | "
             f"{r.get('skipped_share', '-')} | {r.get('decode_mb_per_cpu_s', '-')} | "
             f"{r.get('residence_p50_us', '-')} | "
             + (f"{r['residence_p99_us']} ({', '.join(map(str, r['residence_p99_rounds']))})"
                if "residence_p99_us" in r else "-") + " |" for r in summary]
    return head + "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
