"""Record the benchmark capture: ≥ 1,000,000 packets of real client traffic over an MTU 1500 veth.

    sudo python tools/record_bench_capture.py            # reuses the cached capture when present
    sudo python tools/record_bench_capture.py --force    # records a fresh one

A Tansu broker (in-memory storage) runs in one lab namespace, the clients in the other
(tests/lab/netns.py); tcpdump watches the client's veth. Load comes in rounds of
tests/bench/load_client.py: librdkafka producers, one per codec, all at once, while a consumer
group fetches and commits; each round uses a fresh topic and group, so group joins, syncs and
leaves recur. Rounds go on until the capture holds --packets packets. The capture and its
manifest go to the cache directory (never into the repository: it is hundreds of MB).
Needs root, tcpdump, capinfos, tshark, ip.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab import capinfo  # noqa: E402
from tests.lab.netns import lab_network  # noqa: E402
from tests.lab.recorder import PacketsDropped, Recorder  # noqa: E402
from tests.lab.tansu import TansuBroker, tansu_version  # noqa: E402

CACHE = Path(os.environ.get("KINSPECT_BENCH_CACHE", Path.home() / ".cache" / "kinspect-bench"))
NAME = "bench-1m"
PCAP_HEADER = 24
RECORD_HEADER = struct.Struct("<IIII")  # tcpdump writes host order; the lab is little-endian


def capture_path(cache: Path = CACHE, name: str = NAME) -> Path:
    return cache / f"{name}.pcap"


def manifest_path(cache: Path = CACHE, name: str = NAME) -> Path:
    return cache / f"{name}.manifest.json"


class PacketCounter:
    """Packets tcpdump has written so far, counted by walking record headers from where the
    last count stopped (the newest record may be half-written; it is counted next time)."""

    def __init__(self, path: Path):
        self.path, self.offset, self.count = path, PCAP_HEADER, 0

    def __call__(self) -> int:
        if not self.path.exists():
            return 0
        with self.path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            while self.offset + RECORD_HEADER.size <= end:
                f.seek(self.offset)
                captured = RECORD_HEADER.unpack(f.read(RECORD_HEADER.size))[2]
                if self.offset + RECORD_HEADER.size + captured > end:
                    break
                self.offset += RECORD_HEADER.size + captured
                self.count += 1
        return self.count


def run_round(prefix: list[str], bootstrap: str, topic: str, number: int, args, log_dir: Path,
              extra: list[str] = ()) -> dict:
    """One round of tests/bench/load_client.py (``extra``: more of its options): its manifest."""
    argv = [*prefix, sys.executable, "-m", "tests.bench.load_client", "--bootstrap", bootstrap,
            "--topic", topic, "--messages", str(args.messages),
            "--value-size", str(args.value_size), "--seed", str(number), *extra]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
    (log_dir / f"round-{number}.log").write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"load round {number} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    manifest = json.loads(proc.stdout)
    manifest["command"] = ["python" if a == sys.executable else a for a in argv]
    return manifest


def record_once(capture: Path, args, log_dir: Path) -> dict:
    rounds = []
    with ExitStack() as stack:
        net = stack.enter_context(lab_network())
        broker = stack.enter_context(
            TansuBroker(host=net.broker.address, exec_prefix=net.broker.exec_prefix()))
        recorder = Recorder(capture, net.client.interface, f"tcp port {broker.port}", tool=args.tool,
                            fmt="pcap", exec_prefix=net.client.exec_prefix())
        count_packets = PacketCounter(capture)
        with recorder:
            while (seen := count_packets()) < args.packets:
                print(f"round {len(rounds)}: {seen:,} packets so far", file=sys.stderr, flush=True)
                number = len(rounds)
                rounds.append(run_round(net.client.exec_prefix(), broker.bootstrap, f"bench-{number}",
                                        number, args, log_dir,
                                        ["--rate", str(args.rate)] if args.rate else []))
        capture_argv = [capture.name if a == str(capture) else a for a in recorder.argv()]
    return {"broker": {"name": "tansu", "version": tansu_version(), "bootstrap": broker.bootstrap,
                       "storage": "memory://tansu/"},
            "capture": {"tool": tool_version(args.tool), "argv": capture_argv, "network": "veth",
                        "interface": net.client.interface, "mtu": net.mtu, "bpf": recorder.bpf,
                        "format": "pcap", "encapsulation": "ether", "port": broker.port},
            "rounds": rounds}


def tool_version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def cached(cache: Path, name: str, enough: Callable[[dict], bool]) -> dict | None:
    """The cached capture's manifest, if the capture is there and ``enough(file_info)``."""
    if not capture_path(cache, name).is_file() or not manifest_path(cache, name).is_file():
        return None
    manifest = json.loads(manifest_path(cache, name).read_text())
    return manifest if enough(manifest["file_info"]) else None


def record_until_no_drops(cache: Path, name: str, attempts: int,
                          record_once: Callable[[Path, Path], dict]) -> tuple[dict, Path, int, float]:
    """``record_once(partial, log_dir)`` until no packets drop: (what it returned, the partial
    recording, the attempt that succeeded, its seconds)."""
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / f"{name}.partial.pcap"
    log_dir = cache / f"{name}.logs"
    log_dir.mkdir(exist_ok=True)
    for attempt in range(1, attempts + 1):
        partial.unlink(missing_ok=True)
        started = time.time()
        try:
            return record_once(partial, log_dir), partial, attempt, round(time.time() - started, 1)
        except PacketsDropped as exc:
            print(f"attempt {attempt}: {exc}", file=sys.stderr)
            partial.unlink(missing_ok=True)
            if attempt == attempts:
                raise
    raise ValueError("attempts must be at least 1")


def keep(cache: Path, name: str, partial: Path, manifest: dict) -> dict:
    """The recording moved to its cached name, and its manifest written beside it."""
    argv = manifest["capture"]["argv"]
    manifest["capture"]["argv"] = [manifest["file"] if a == partial.name else a for a in argv]
    partial.rename(capture_path(cache, name))
    manifest_path(cache, name).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def record(args) -> dict:
    cache, name = args.cache, args.name
    manifest, partial, _, seconds = record_until_no_drops(
        cache, name, args.attempts, lambda partial, log_dir: record_once(partial, args, log_dir))
    info = capinfo.describe(partial)
    if info.packets < args.packets:
        raise RuntimeError(f"capinfos counts {info.packets} packets, fewer than {args.packets}")
    manifest = {"file": capture_path(cache, name).name,
                "summary": "librdkafka producers (none, gzip, snappy, lz4, zstd at once) and a "
                           "committing consumer group, in rounds, over an MTU 1500 veth",
                "command": " ".join(["python", "tools/record_bench_capture.py", *args.argv]),
                "recorded_seconds": seconds,
                "file_info": info.to_dict(), **manifest}
    return keep(cache, name, partial, manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--name", default=NAME)
    parser.add_argument("--packets", type=int, default=1_000_000, help="record at least this many")
    parser.add_argument("--messages", type=int, default=20_000, help="per codec per round")
    parser.add_argument("--value-size", type=int, default=400)
    parser.add_argument("--rate", type=float, default=1500,
                        help="messages/s per producer (unpaced, the capture tool drops packets); 0: unpaced")
    parser.add_argument("--tool", choices=("dumpcap", "tcpdump"), default="dumpcap",
                        help="capture tool (dumpcap keeps up better: no per-packet flush)")
    parser.add_argument("--attempts", type=int, default=3, help="recordings to try when packets drop")
    parser.add_argument("--force", action="store_true", help="record even when a cached capture exists")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # for the manifest
    manifest = None if args.force else cached(args.cache, args.name, lambda info: info["packets"] >= args.packets)
    if manifest is None:
        if os.geteuid() != 0:
            parser.error("needs root: network namespaces and packet capture")
        manifest = record(args)
    info = manifest["file_info"]
    print(f"{capture_path(args.cache, args.name)}: {info['packets']:,} packets, "
          f"{info['size_bytes']:,} bytes, max frame {info['max_frame_len']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
