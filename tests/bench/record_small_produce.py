"""Record the small-Produce benchmark capture: librdkafka at its defaults on a broker host's lo.

    sudo python tests/bench/record_small_produce.py            # reuses the cached capture when present
    sudo python tests/bench/record_small_produce.py --force    # records a fresh one

The third capture shape (issue 36), the one most users meet: librdkafka producers at their
default linger and batch settings (linger.ms 5, batch.size 1,000,000) under moderate traffic
send many small Produce requests. As for the loopback capture (tools/record_loopback_capture.py),
an Apache Kafka broker (KRaft, tests/lab/kafka.py) runs on 127.0.0.1:9092 in a lab namespace
holding only its loopback (MTU 65536, TSO/GRO), the clients run beside it and dumpcap records
its lo. Load comes in rounds of tests/bench/load_client.py: three producers at once, codecs
none, lz4 and zstd, left at librdkafka's batching defaults and paced in a steady stream (a pause
every --burst messages, not every 256), at rates that make Produce requests of 2-8 KB (the
compressed codecs need more messages per request for the same bytes); meanwhile a consumer group
of two fetches everything back and commits every 500 messages. A fresh topic and group per
round. Rounds go on until the file holds --bytes bytes AND tshark counts --produce Produce
requests in it. A recording with dropped packets is thrown away and recorded again.

The manifest (beside the capture in the cache directory, never in the repository) has what the
loopback capture's has, plus the sizes of the Produce requests as tshark frames them.
Needs root, Java 17, mvn (first run), dumpcap, capinfos, tshark, ip.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.lab import capinfo  # noqa: E402
from tests.lab.enter_netns import entered  # noqa: E402
from tests.lab.kafka import KAFKA_4, KafkaBroker  # noqa: E402
from tests.lab.netns import loopback_namespace  # noqa: E402
from tests.lab.recorder import Recorder  # noqa: E402
from tools.record_bench_capture import (CACHE, cached, capture_path, keep,  # noqa: E402
                                        record_until_no_drops, run_round, tool_version)
from tools.record_loopback_capture import _java_version, _link_details, wire_facts  # noqa: E402

NAME = "bench-small-produce"
PORT = 9092
# messages/s per producer: with linger.ms 5 and three partitions these give Produce requests of
# 2-8 KB for 400-byte JSON-like values (none: ~8 values a request; lz4, zstd: ~2-4x as many)
RATES = "none=3000,lz4=7000,zstd=9000"
SIZE_BUCKETS = (0, 1024, 2048, 4096, 8192, 16384, 65536)


def record_once(capture: Path, args, log_dir: Path) -> dict:
    rounds = []
    with ExitStack() as stack:
        side = stack.enter_context(loopback_namespace())
        with entered(side.netns):  # the JVM, its storage tool and the port probes are born inside
            broker = stack.enter_context(KafkaBroker(KAFKA_4, port=PORT, heap=args.heap))
        mtu = int(subprocess.run([*side.exec_prefix(), "cat", "/sys/class/net/lo/mtu"],
                                 capture_output=True, text=True, check=True).stdout)
        offloads = _link_details(side.exec_prefix())
        recorder = Recorder(capture, "lo", f"tcp port {broker.port}", tool="dumpcap", fmt="pcap",
                            exec_prefix=side.exec_prefix(), buffer_mib=args.buffer_mib)
        requests = 0
        with recorder:
            while (size := _size(capture)) < args.bytes or requests < args.produce:
                number = len(rounds)
                print(f"round {number}: {size / 1e6:,.1f} MB, {requests:,} Produce requests so far",
                      file=sys.stderr, flush=True)
                rounds.append(run_round(side.exec_prefix(), broker.bootstrap, f"small-{number}", number,
                                        args, log_dir, ["--codecs", args.codecs, "--rates", args.rates,
                                                        "--burst", str(args.burst), "--librdkafka-defaults"]))
                requests = len(produce_sizes(capture, PORT))  # the file so far (its last packet may be cut)
        capture_argv = [capture.name if a == str(capture) else a for a in recorder.argv()]
        statistics_lines = [line for line in recorder.stderr if "captured" in line or "dropped" in line]
        broker_settings = {k: str(v) for k, v in broker.settings.items() if k != "log.dirs"}
    return {"broker": {"name": "apache-kafka", "version": f"Apache Kafka {KAFKA_4}",
                       "bootstrap": broker.bootstrap, "metadata": "kraft",
                       "storage": "KRaft (combined broker and controller), log dir on disk",
                       "config": broker_settings, "java": _java_version()},
            "capture": {"tool": tool_version("dumpcap"), "argv": capture_argv,
                        "network": "loopback (a lab namespace of its own)", "interface": "lo",
                        "mtu": mtu, "link": offloads, "bpf": recorder.bpf, "format": "pcap",
                        "encapsulation": "ether", "port": broker.port,
                        "dumpcap_statistics": statistics_lines},
            "rounds": rounds}


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def produce_sizes(capture: Path, port: int) -> list[int]:
    """The size of every Produce request tshark frames in the capture (its length field + 4)."""
    out = subprocess.run(["tshark", "-n", "-r", str(capture), "-d", f"tcp.port=={port},kafka",
                          "-Y", f"tcp.dstport == {port} && kafka.api_key == 0", "-T", "fields",
                          "-e", "kafka.api_key", "-e", "kafka.len"],
                         capture_output=True, text=True).stdout
    sizes = []
    for line in out.splitlines():
        keys, lengths = (line.split("\t") + [""])[:2]
        for key, length in zip(keys.split(","), lengths.split(",")):
            if key == "0" and length.isdigit():
                sizes.append(int(length) + 4)
    return sizes


def size_distribution(sizes: list[int]) -> dict:
    data = sorted(sizes)
    if not data:
        return {"requests": 0}
    names = {0: "< 1 KiB", 1024: "1-2 KiB", 2048: "2-4 KiB", 4096: "4-8 KiB", 8192: "8-16 KiB",
             16384: "16-64 KiB", 65536: "64 KiB+"}
    buckets = Counter(max(b for b in SIZE_BUCKETS if b <= n) for n in data)
    quantile = lambda q: data[min(len(data) - 1, int(q * len(data)))]  # noqa: E731
    return {"requests": len(data), "bytes": sum(data), "mean": round(statistics.fmean(data), 1),
            "p10": quantile(0.1), "p50": quantile(0.5), "p90": quantile(0.9), "max": data[-1],
            "in_2_to_8_kib": sum(1 for n in data if 2048 <= n < 8192),
            "buckets": {names[b]: buckets[b] for b in SIZE_BUCKETS if buckets[b]}}


def record(args) -> dict:
    cache, name = args.cache, args.name
    manifest, partial, attempt, recorded = record_until_no_drops(
        cache, name, args.attempts, lambda partial, log_dir: record_once(partial, args, log_dir))
    info = capinfo.describe(partial)
    sizes = produce_sizes(partial, PORT)
    if info.size_bytes < args.bytes or len(sizes) < args.produce:
        raise RuntimeError(f"{partial} holds {info.size_bytes:,} bytes and {len(sizes):,} Produce requests, "
                           f"fewer than {args.bytes:,} and {args.produce:,}")
    rounds = manifest["rounds"]
    manifest = {"file": capture_path(cache, name).name,
                "summary": f"librdkafka producers at their default linger and batch settings "
                           f"({args.rates.replace(',', ', ')} messages/s, at once, a pause every "
                           f"{args.burst} messages) and a committing consumer group of two, in rounds, "
                           "against Apache Kafka on loopback (MTU 65536, TSO/GRO): many small Produce requests",
                "command": " ".join(["python", "tests/bench/record_small_produce.py", *args.argv]),
                "recorded_seconds": recorded, "attempts": attempt,
                "file_info": info.to_dict(),
                "clients": {"library": "librdkafka", "versions": rounds[0]["versions"] if rounds else None,
                            "batching": "librdkafka defaults (linger.ms 5, batch.size 1000000)",
                            "producers": args.codecs.split(","), "rates": args.rates,
                            "consumers": rounds[0]["consumers"] if rounds else None,
                            "messages_delivered": sum(c["delivered"] for r in rounds for c in r["produced"].values()),
                            "messages_consumed": sum(r["consumed"] for r in rounds),
                            "commits": sum(r["commits"] for r in rounds)},
                "produce_requests": size_distribution(sizes),
                **manifest, "wire": wire_facts(partial, manifest["capture"]["port"])}
    return keep(cache, name, partial, manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--bytes", type=int, default=160_000_000, help="record until the file holds this many")
    parser.add_argument("--produce", type=int, default=26_000, help="... and this many Produce requests")
    parser.add_argument("--codecs", default="none,lz4,zstd", help="one producer per codec, all at once")
    parser.add_argument("--rates", default=RATES, help="messages/s per producer, per codec")
    parser.add_argument("--burst", type=int, default=8, help="messages between the producers' pacing pauses")
    parser.add_argument("--messages", type=int, default=20_000, help="per codec per round")
    parser.add_argument("--value-size", type=int, default=400)
    parser.add_argument("--buffer-mib", type=int, default=256, help="dumpcap's kernel buffer")
    parser.add_argument("--heap", default="1g", help="the broker's Java heap")
    parser.add_argument("--attempts", type=int, default=3, help="recordings to try when packets drop")
    parser.add_argument("--force", action="store_true", help="record even when a cached capture exists")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for the manifest
    manifest = None if args.force else cached(args.cache, args.name, lambda info: info["size_bytes"] >= args.bytes)
    if manifest is None:
        if os.geteuid() != 0:
            parser.error("needs root: a network namespace and packet capture")
        manifest = record(args)
    info, requests = manifest["file_info"], manifest["produce_requests"]
    print(f"{capture_path(args.cache, args.name)}: {info['packets']:,} packets, {info['size_bytes']:,} bytes; "
          f"{requests['requests']:,} Produce requests, p10 {requests['p10']:,} B, p50 {requests['p50']:,} B, "
          f"p90 {requests['p90']:,} B, {requests['in_2_to_8_kib'] / requests['requests']:.0%} of them 2-8 KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
