"""Record the loopback benchmark capture: ≥ 300 MB of real client traffic on a broker host's lo.

    sudo python tools/record_loopback_capture.py            # reuses the cached capture when present
    sudo python tools/record_loopback_capture.py --force    # records a fresh one

The second capture shape of issue 11: on loopback the MTU is 65536 and TSO/GRO hand the capture
whole writes, so TCP segments are 4-64 KB instead of 1.5 KB and decoding costs per byte rather
than per packet. An Apache Kafka broker (KRaft, from the lab's Maven Central jars,
tests/lab/kafka.py) runs on 127.0.0.1:9092 in a lab namespace of its own that has nothing but
its loopback (tests/lab/netns.py: loopback_namespace); the clients run in the same namespace and
dumpcap records its lo, so no other traffic of the machine is in the file. Load comes in rounds
of tests/bench/load_client.py: three librdkafka producers at once, codecs none, lz4 and zstd,
paced at 1,000 messages/s each (in bursts of 256: Produce requests of 10-60 KB; unpaced, nearly
every segment is 64 KB and dumpcap drops packets), while a consumer group of two librdkafka
consumers keeps up, fetching everything back (Fetch responses of a few KB to 64 KB) and
committing every 500 messages; each round has a fresh topic and group. Rounds go on until the file holds --bytes bytes. A
recording the kernel dropped packets from (dumpcap's statistics) is thrown away and recorded
again. The capture and its manifest (packets, bytes, TCP segment sizes, the API keys and versions
tshark sees, client and broker versions) go to the cache directory, never into the repository.
Needs root, Java 17, mvn (first run: Kafka's jars), dumpcap, capinfos, tshark, ip.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab import capinfo  # noqa: E402
from tests.lab.api_names import API_NAMES  # noqa: E402
from tests.lab.enter_netns import entered  # noqa: E402
from tests.lab.kafka import KAFKA_4, KafkaBroker  # noqa: E402
from tests.lab.netns import loopback_namespace  # noqa: E402
from tests.lab.recorder import Recorder  # noqa: E402
from tools.record_bench_capture import (CACHE, cached, capture_path, keep,  # noqa: E402
                                        record_until_no_drops, run_round, tool_version)

NAME = "bench-loopback"
PORT = 9092  # the namespace is the broker's own: every port is free, and 9092 is both tools' default
CODECS = "none,lz4,zstd"
SEGMENT_BUCKETS = (0, 1, 1024, 4096, 16384, 32768, 65536)  # lower bounds of tcp.len buckets


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
        with recorder:
            while (size := _size(capture)) < args.bytes:
                print(f"round {len(rounds)}: {size / 1e6:,.1f} MB so far", file=sys.stderr, flush=True)
                number = len(rounds)
                rounds.append(run_round(side.exec_prefix(), broker.bootstrap, f"loopback-{number}",
                                        number, args, log_dir,
                                        ["--codecs", args.codecs, "--rate", str(args.rate)]))
        capture_argv = [capture.name if a == str(capture) else a for a in recorder.argv()]
        statistics_lines = [line for line in recorder.stderr if "Packets" in line]
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


def _link_details(prefix: list[str]) -> str:
    """gso/tso/gro limits of lo as `ip -d link` prints them (what lets segments reach 64 KB)."""
    out = subprocess.run([*prefix, "ip", "-d", "link", "show", "lo"], capture_output=True, text=True).stdout
    words = out.split()
    return " ".join(f"{k} {words[i + 1]}" for i, k in enumerate(words[:-1])
                    if k in ("mtu", "gso_max_size", "gso_max_segs", "tso_max_size", "gro_max_size"))


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (out.stderr or out.stdout).splitlines()[0].strip()


def wire_facts(capture: Path, port: int) -> dict:
    """One tshark pass: TCP segment sizes per direction, and the Kafka API keys and versions
    tshark decodes (a request's version; tshark prints none for responses)."""
    out = subprocess.run(["tshark", "-n", "-r", str(capture), "-d", f"tcp.port=={port},kafka", "-T", "fields",
                          "-e", "tcp.srcport", "-e", "tcp.len", "-e", "kafka.api_key", "-e", "kafka.api_version",
                          "-e", "kafka.correlation_id"],
                         capture_output=True, text=True, check=True).stdout
    lengths: list[int] = []
    by_direction = {"to broker": [], "from broker": []}
    requests, responses = Counter(), Counter()
    for line in out.splitlines():
        sport, length, keys, versions, correlations = (line.split("\t") + [""] * 5)[:5]
        if not length:
            continue
        n = int(length)
        lengths.append(n)
        direction = "from broker" if sport == str(port) else "to broker"
        by_direction[direction].append(n)
        keys = [k for k in keys.split(",") if k]
        if direction == "to broker":
            versions = versions.split(",") if versions else []
            for i, key in enumerate(keys):
                version = versions[i] if i < len(versions) else "?"
                requests[f"{_api(key)} v{version}"] += 1
        else:
            for key in keys:
                responses[_api(key)] += 1
            # tshark 4.0 leaves a response undecoded ("Request Missing") when it could not
            # decode its request's version: Produce v10 and Fetch v16 among them
            undecoded = len([c for c in correlations.split(",") if c]) - len(keys)
            if undecoded > 0:
                responses["(undecoded by tshark)"] += undecoded
    return {"tcp_segments": {"all": _distribution(lengths),
                             **{d: _distribution(v) for d, v in by_direction.items()}},
            "kafka_requests_by_api_version": dict(sorted(requests.items(), key=lambda kv: -kv[1])),
            "kafka_responses_by_api": dict(sorted(responses.items(), key=lambda kv: -kv[1])),
            "tshark": tool_version("tshark")}


def _api(key: str) -> str:
    return API_NAMES.get(int(key), f"api {key}") if key.isdigit() else key


def _distribution(lengths: list[int]) -> dict:
    """tcp.len of every packet: how many carry data, and how the data-carrying ones are sized."""
    data = sorted(n for n in lengths if n > 0)
    buckets = Counter()
    for n in lengths:
        low = max(b for b in SEGMENT_BUCKETS if b <= n)
        buckets[low] += 1
    names = {0: "0 (ack only)", 1: "1 B-1 KiB", 1024: "1-4 KiB", 4096: "4-16 KiB", 16384: "16-32 KiB",
             32768: "32-64 KiB", 65536: "64 KiB+"}
    quantile = (lambda q: data[min(len(data) - 1, int(q * len(data)))]) if data else (lambda q: 0)
    return {"packets": len(lengths), "with_payload": len(data), "payload_bytes": sum(data),
            "payload_bytes_in_4k_or_more": sum(n for n in data if n >= 4096),
            "mean_payload": round(statistics.fmean(data), 1) if data else 0,
            "p50": quantile(0.5), "p90": quantile(0.9), "p99": quantile(0.99), "max": data[-1] if data else 0,
            "buckets": {names[b]: buckets[b] for b in SEGMENT_BUCKETS if buckets[b]}}


def record(args) -> dict:
    cache, name = args.cache, args.name
    manifest, partial, attempt, recorded = record_until_no_drops(
        cache, name, args.attempts, lambda partial, log_dir: record_once(partial, args, log_dir))
    info = capinfo.describe(partial)
    if info.size_bytes < args.bytes:
        raise RuntimeError(f"{partial} holds {info.size_bytes:,} bytes, fewer than {args.bytes:,}")
    rounds = manifest["rounds"]
    manifest = {"file": capture_path(cache, name).name,
                "summary": f"librdkafka producers ({args.codecs.replace(',', ', ')} at once, "
                           f"{'unpaced' if not args.rate else f'{args.rate:g} messages/s each'}) and a "
                           "committing consumer group of two, in rounds, against Apache Kafka on loopback "
                           "(MTU 65536, TSO/GRO)",
                "command": " ".join(["python", "tools/record_loopback_capture.py", *args.argv]),
                "recorded_seconds": recorded, "attempts": attempt,
                "file_info": info.to_dict(),
                "clients": {"library": "librdkafka", "versions": rounds[0]["versions"] if rounds else None,
                            "producers": args.codecs.split(","), "consumers": rounds[0]["consumers"] if rounds else None,
                            "messages_delivered": sum(c["delivered"] for r in rounds for c in r["produced"].values()),
                            "messages_consumed": sum(r["consumed"] for r in rounds),
                            "commits": sum(r["commits"] for r in rounds)},
                **manifest, "wire": wire_facts(partial, manifest["capture"]["port"])}
    return keep(cache, name, partial, manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--bytes", type=int, default=300_000_000, help="record until the file holds this many")
    parser.add_argument("--codecs", default=CODECS, help="one producer per codec, all at once")
    parser.add_argument("--messages", type=int, default=20_000, help="per codec per round")
    parser.add_argument("--value-size", type=int, default=400)
    parser.add_argument("--rate", type=float, default=1000,
                        help="messages/s per producer; 0: unpaced (nearly every segment 64 KB, few Fetches)")
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
    info, segments = manifest["file_info"], manifest["wire"]["tcp_segments"]["all"]
    print(f"{capture_path(args.cache, args.name)}: {info['packets']:,} packets, {info['size_bytes']:,} bytes, "
          f"max frame {info['max_frame_len']}; TCP payload p50 {segments['p50']:,} B, p90 {segments['p90']:,} B, "
          f"{segments['payload_bytes_in_4k_or_more'] / max(1, segments['payload_bytes']):.0%} of payload bytes "
          f"in segments of 4 KiB or more")
    return 0


if __name__ == "__main__":
    sys.exit(main())
