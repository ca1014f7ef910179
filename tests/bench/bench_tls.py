"""TLS benchmark (not a test): decode the same Kafka traffic in plaintext and inside TLS.

    sudo python tests/bench/bench_tls.py                 # 40 rounds of the fixtures, 5 runs each
    sudo python tests/bench/bench_tls.py --rounds 100 --repeat 7 --versions 1.3
    sudo python tests/bench/bench_tls.py --bulk            # the same bytes over 66 long connections

The Kafka connections of the committed fixtures (pcaps/: librdkafka, kafka-python, aiokafka and
Java clients against real brokers) are sent again ``--rounds`` times over loopback, once in plain
TCP and once per TLS setting (Python's ssl, key log written by OpenSSL), each captured with
tcpdump (test_tls_capture.record_replay). Then ``kinspect decode --json -j1`` (one process: the
decoder itself, not the worker pool) runs on each capture, the captures interleaved run by run;
the TLS runs get ``--keylog``. Per run: wall time, the child's CPU time (os.wait4), peak RSS, and
the CPU the rest of the machine used meanwhile. The figure is plaintext CPU time / TLS CPU time
(issue 15: at least 0.7). Writes tests/bench/results/tls-<date>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, run_child  # noqa: E402
from tests.integration.test_tls_capture import fixture_streams, record_replay  # noqa: E402
from tests.lab.certs import CertificateAuthority  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FIXTURES = ["librdkafka-produce-consume.pcapng", "aiokafka-mtu1500.pcapng", "kafka-python-sll2.pcap",
            "kafka41-librdkafka-mtu1500.pcap", "java-console-consumer.pcap", "java-transactions.pcap"]
SETTINGS = {"1.2": ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"), "1.3": ("1.3", "TLS_AES_128_GCM_SHA256"),
            "1.3-chacha": ("1.3", "TLS_CHACHA20_POLY1305_SHA256")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40, help="times each fixture connection is sent")
    parser.add_argument("--repeat", type=int, default=5, help="decode runs per capture, interleaved")
    parser.add_argument("--versions", default="1.2,1.3,1.3-chacha", help=f"of {', '.join(SETTINGS)}")
    parser.add_argument("--bulk", action="store_true",
                        help="each fixture connection carries its streams --rounds times over (long-lived "
                             "connections, few handshakes) instead of being opened --rounds times")
    parser.add_argument("--reuse", type=Path, help="a previous run's directory: decode its captures again")
    args = parser.parse_args()
    connections = []
    for name in FIXTURES:
        connections += fixture_streams(REPO / "pcaps" / name)
    if args.bulk:  # the same bytes in few connections: correlation ids repeat, in plaintext and TLS alike
        connections = [{"client": c["client"] * args.rounds, "server": c["server"] * args.rounds,
                        "label": c["label"]} for c in connections]
    else:
        connections = connections * args.rounds
    work = args.reuse or Path(tempfile.mkdtemp(prefix="bench-tls-"))
    captures = {}
    started = time.monotonic()
    if args.reuse:
        captures["plain"] = (work / "plain.pcap", None)
        for setting in args.versions.split(","):
            captures[setting] = (work / f"tls{setting}.pcap", work / f"tls{setting}-keys.log")
    else:
        ca = CertificateAuthority(work / "ca")
        capture, _, _ = record_replay(work, ca, connections, "plain", "", name="plain")
        captures["plain"] = (capture, None)
    for setting in [] if args.reuse else args.versions.split(","):
        version, cipher = SETTINGS[setting]
        capture, keylog, said = record_replay(work, ca, connections, version, cipher, name=f"tls{setting}")
        captures[setting] = (capture, keylog)
        print(f"recorded {setting}: {said[0]}", file=sys.stderr)
    if not args.reuse:
        print(f"recorded {len(connections)} connections per capture in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
    runs: dict[str, list] = {name: [] for name in captures}
    for i in range(args.repeat):
        for name, (capture, keylog) in captures.items():
            argv = [sys.executable, "-m", "kinspect", "decode", "--json", "-j", "1"]
            argv += ["--keylog", str(keylog)] if keylog else []
            run = run_child(argv + [str(capture)])
            runs[name].append(dataclasses.asdict(run))
            print(f"run {i} {name}: {run.wall_s} s wall, {run.user_s + run.sys_s:.2f} s CPU, "
                  f"{run.peak_rss_mb} MB, others {run.others_cpu_s} CPU-s, exit {run.exit_code}", file=sys.stderr)
    table = {}
    plain_cpus = [r["user_s"] + r["sys_s"] for r in runs["plain"]]
    plain_cpu = statistics.median(plain_cpus)
    for name, rs in runs.items():
        cpus = [r["user_s"] + r["sys_s"] for r in rs]
        cpu = statistics.median(cpus)
        paired = [p / c for p, c in zip(plain_cpus, cpus)]  # each run against the plain run of its round
        table[name] = {"size_mb": round(captures[name][0].stat().st_size / 1e6, 1),
                       "median_wall_s": statistics.median(r["wall_s"] for r in rs), "median_cpu_s": round(cpu, 3),
                       "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                       "speed_vs_plain": round(plain_cpu / cpu, 3),
                       "paired_median": round(statistics.median(paired), 3),
                       "paired_range": [round(min(paired), 3), round(max(paired), 3)]}
    result = {"machine": machine_facts(), "captures": str(work), "bulk": args.bulk,
              # with --reuse the captures were recorded by an earlier run, whose rounds are not known here
              "rounds": None if args.reuse else args.rounds, "connections": None if args.reuse else len(connections),
              "repeat": args.repeat, "table": table, "runs": runs}
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"tls-{'bulk-' if args.bulk else ''}{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=1))
    print(f"{'capture':<12} {'MB':>6} {'wall s':>8} {'CPU s':>8} {'RSS MB':>7} {'speed vs plain':>15} {'paired rounds':>20}")
    for name, row in table.items():
        low, high = row["paired_range"]
        print(f"{name:<12} {row['size_mb']:>6} {row['median_wall_s']:>8} {row['median_cpu_s']:>8} "
              f"{row['peak_rss_mb']:>7} {row['speed_vs_plain']:>15} {row['paired_median']:>7} ({low}-{high})")
    print(f"written {out}")


if __name__ == "__main__":
    main()
