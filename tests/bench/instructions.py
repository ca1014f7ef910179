"""Instructions per packet under callgrind: kinspect decode --json -j1 against tshark (not a test).

    python tests/bench/instructions.py                   # first 20,000 and 40,000 packets
    python tests/bench/instructions.py FILE --small 20000 --large 40000 --code HEAD

Wall and CPU time drift with a shared machine; instruction counts do not (the same binary and
input give the same count, whatever else runs). Each tool runs under `valgrind --tool=callgrind`
on two prefixes of the capture; the difference divided by the difference in packets is the cost
per packet with start-up cancelled out. Writes results/instructions-<capture>-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import child_env, machine_facts, snapshot_kinspect  # noqa: E402
from tests.bench.prefixes import count_packets, prefix  # noqa: E402
from tools.record_bench_capture import capture_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def instructions(argv: list[str], cwd: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        run = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
                             cwd=cwd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    found = re.search(r"Collected : (\d+)", run.stderr) or re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"callgrind failed for {argv}: {run.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", nargs="?", type=Path, default=capture_path())
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=40_000)
    parser.add_argument("--code", default="HEAD", help="git ref of kinspect to measure, or 'worktree'")
    args = parser.parse_args(argv)
    python = str(Path(sys.executable).resolve())  # the real binary: valgrind does not follow shims
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        code = snapshot_kinspect(work / "code", args.code)
        total = count_packets(args.capture)
        cuts = {n: prefix(args.capture, n, total) for n in (args.small, args.large)}
        tools = {
            "tshark": lambda f: ["tshark", "-r", str(f), "-d", f"tcp.port=={args.port},kafka", "-T", "fields",
                                 "-e", "kafka.api_key", "-e", "kafka.correlation_id"],
            "kinspect --json -j1": lambda f: [python, "-m", "kinspect", "decode", "--json", "-j", "1",
                                              "--port", str(args.port), str(f)],
        }
        rows = []
        for tool, command in tools.items():
            counts = {n: instructions(command(path), work / "code") for n, path in cuts.items()}
            per_packet = (counts[args.large] - counts[args.small]) / (args.large - args.small)
            start_up = counts[args.small] - per_packet * args.small
            rows.append({"tool": tool, "instructions": counts, "per_packet": round(per_packet),
                         "start_up": round(start_up)})
            print(f"{tool:22} {per_packet:10,.0f} instructions/packet   start-up {start_up / 1e9:5.2f} G")
    peer = rows[0]["per_packet"]
    for row in rows:
        row["ratio_vs_tshark"] = round(peer / row["per_packet"], 2)
    print(f"tshark / kinspect: {rows[1]['ratio_vs_tshark']}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"instructions-{args.capture.stem}-{time.strftime('%Y%m%d-%H%M', time.gmtime())}.json"
    out.write_text(json.dumps({"benchmark": "instructions per packet (callgrind)", "machine": {
        **machine_facts(), "kinspect": code}, "capture": str(args.capture.name),
        "packets": [args.small, args.large], "rows": rows}, indent=1) + "\n")
    print(f"results: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
