"""kinspect sniff's capture rate and line delay, per backend (issue 12's benchmark).

Rate: in a loopback namespace of its own, a sender paces small TCP segments (TCP_NODELAY, one
write per packet) at a target rate for --seconds; sniff (every backend, runs interleaved, as the
machine's speed drifts) follows the connection through link decode and TCP reassembly. For each
run: packets sent, seen, kernel drops (sniff's capture notice) and sniff's CPU (its own and its
children's: dumpcap/tcpdump). The highest rate with 0 drops is the figure.

Delay: Tansu on the namespace's lo with a librdkafka producer; each JSON line sniff prints is
stamped as it is read: delay = read time - the response packet's time stamp (response_time).

    python tests/bench/bench_sniff.py [--seconds 60] [--rates 25000,50000,100000,150000]

Writes tests/bench/results/sniff-<date>.json and prints a table. Needs root (namespaces, capture).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.lab.netns import loopback_namespace  # noqa: E402

BACKENDS = ["ring", "dumpcap", "tcpdump"]
SENDER = r"""
import socket, sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
srv = socket.socket(); srv.bind(("127.0.0.1", 7777)); srv.listen()
c = socket.create_connection(("127.0.0.1", 7777)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s, _ = srv.accept()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
import threading
def sink():
    while s.recv(1 << 20): pass
threading.Thread(target=sink, daemon=True).start()
payload = b"k" * 64
start = time.perf_counter(); sent = 0
while True:
    now = time.perf_counter() - start
    if now >= seconds: break
    due = int(now * rate)
    while sent < due:
        c.send(payload); sent += 1
    time.sleep(0.0005)
time.sleep(0.5)
c.close(); s.close()
print(sent)
"""


def _sniff(prefix, backend, extra):
    argv = [*prefix, sys.executable, "-m", "kinspect", "sniff", "lo", "--backend", backend, "--json",
            "--buffer-mb", "32", *extra]
    return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_started(process):
    for line in process.stderr:
        if "capturing on" in line:
            return
    raise RuntimeError("sniff did not start")


def rate_run(backend: str, rate: int, seconds: float) -> dict:
    with loopback_namespace() as ns:
        sniff = _sniff(ns.exec_prefix(), backend, ["--filter", "tcp port 7777", "--no-heuristic"])
        _wait_started(sniff)
        threading.Thread(target=lambda: [None for _ in sniff.stderr], daemon=True).start()
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(sniff.stdout), daemon=True)
        reader.start()
        sender = subprocess.run([*ns.exec_prefix(), sys.executable, "-c", SENDER, str(rate), str(seconds)],
                                capture_output=True, text=True, check=True)
        time.sleep(1.0)
        sniff.send_signal(signal.SIGINT)
        _, status, usage = os.wait4(sniff.pid, 0)
        sniff.returncode = os.waitstatus_to_exitcode(status)
        reader.join(10)
    notice = json.loads(lines[-1])
    sent = int(sender.stdout.strip())
    cpu = usage.ru_utime + usage.ru_stime
    return {"backend": backend, "target_rate": rate, "seconds": seconds, "sent_segments": sent,
            "packets": notice["packets"], "kernel_dropped": notice["kernel_dropped"],
            "kernel_received": notice["kernel_received"], "tcp_gaps": notice["tcp_gaps"],
            "packet_rate": notice["packets"] / seconds, "cpu_seconds": round(cpu, 2),
            "cpu_share": round(cpu / seconds, 3)}


def delay_run(backend: str, seconds: float) -> dict:
    from tests.lab.tansu import TansuBroker

    with loopback_namespace() as ns:
        with TansuBroker(host="127.0.0.1", exec_prefix=ns.exec_prefix()) as broker:
            sniff = _sniff(ns.exec_prefix(), backend, ["--filter", f"tcp port {broker.port}"])
            _wait_started(sniff)
            threading.Thread(target=lambda: [None for _ in sniff.stderr], daemon=True).start()
            delays: list[float] = []

            def read():
                for line in sniff.stdout:
                    now = time.time()
                    record = json.loads(line)
                    if record.get("type") == "exchange" and record.get("response_time"):
                        delays.append((now - record["response_time"]) * 1000)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            subprocess.run([*ns.exec_prefix(), sys.executable, "-m", "tests.lab.clients.librdkafka_client",
                            "--bootstrap", broker.bootstrap, "--codecs", "none,lz4,zstd",
                            "--count", str(int(seconds * 20))], cwd=REPO, capture_output=True, timeout=600)
            time.sleep(0.5)
            sniff.send_signal(signal.SIGINT)
            sniff.wait(60)
            reader.join(10)
    delays.sort()
    q = statistics.quantiles(delays, n=100) if len(delays) > 2 else [None] * 99
    return {"backend": backend, "lines": len(delays), "delay_p50_ms": q[49] and round(q[49], 2),
            "delay_p99_ms": q[98] and round(q[98], 2), "delay_max_ms": delays and round(delays[-1], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rates", default="25000,50000,100000,150000")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    backends = args.backends.split(",")
    results = {"head": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                      text=True).stdout.strip(),
               "seconds": args.seconds, "rate": [], "delay": []}
    for _ in range(args.rounds):
        for rate in map(int, args.rates.split(",")):
            for backend in backends:  # interleaved: the machine's speed drifts
                row = rate_run(backend, rate, args.seconds)
                results["rate"].append(row)
                print(json.dumps(row), flush=True)
        for backend in backends:
            row = delay_run(backend, min(args.seconds, 20))
            results["delay"].append(row)
            print(json.dumps(row), flush=True)
    out = REPO / "tests" / "bench" / "results" / f"sniff-{time.strftime('%Y%m%d-%H%M')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
