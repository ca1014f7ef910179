"""Doctor benchmark (not a test): kinspect doctor against kinspect decode --json of the same file.

    python tests/bench/bench_doctor.py                       # both cached lab captures
    python tests/bench/bench_doctor.py FILE --port 9092 --fractions 0.25,1 --repeat 3

Issue 34's target: doctor in at most 1.3× decode --json's time, with memory flat in the
capture's length. On the first 10%, 25%, 50% and 100% of each capture's packets (prefixes cut
with editcap, as bench_decode does), each tool runs with stdout to /dev/null, interleaved and
rotated per round; per run the wall time, the CPU time (the child's and its reaped workers'),
the peak RSS of the largest process and the sampled peak PSS of the process tree
(tests/bench/measure.py). The medians per part and tool, doctor's ratios to decode, and how peak
memory grew from the smallest part to the whole are printed and written to
tests/bench/results/doctor-<capture>-<date>.json (and .md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, run_child, snapshot_kinspect  # noqa: E402
from tests.bench.prefixes import count_packets, prefix  # noqa: E402
from tools.record_bench_capture import capture_path  # noqa: E402
from tools.record_loopback_capture import NAME as LOOPBACK_NAME  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FRACTIONS = (0.1, 0.25, 0.5, 1.0)
PEER = "decode --json"
TOOLS = (PEER, "doctor --json")
SHAPES = {
    capture_path(): "sudo python tools/record_bench_capture.py",
    capture_path(name=LOOPBACK_NAME): "sudo python tools/record_loopback_capture.py",
}


def argv_for(tool: str, capture: Path, port: int) -> list[str]:
    ports = [] if port == 9092 else ["--port", str(port)]
    command, *flags = tool.split()
    return [sys.executable, "-m", "kinspect", command, *ports, *flags, str(capture)]


def measure(capture: Path, port: int, fractions, repeat: int, code: Path) -> list[dict]:
    total = count_packets(capture)
    runs = []
    for fraction in fractions:
        packets = max(1, round(total * fraction))
        path = prefix(capture, packets, total)
        for r in range(repeat):
            for tool in TOOLS[r % 2:] + TOOLS[:r % 2]:
                child = run_child(argv_for(tool, path, port), cwd=code)
                runs.append({"fraction": fraction, "packets": packets, "bytes": path.stat().st_size, "tool": tool,
                             "repeat": r, "load_average_1m": round(os.getloadavg()[0], 2), **child.to_dict()})
                print(f"  {fraction:>5.0%} {tool:14} {child.wall_s:8.2f} s wall {child.cpu_s:8.2f} s cpu "
                      f"{child.peak_rss_mb:8.1f} MB {child.peak_tree_pss_mb:8.1f} MB tree  others "
                      f"{child.others_cores:4.2f} CPUs  exit {child.exit_code}", file=sys.stderr, flush=True)
    return runs


def aggregate(runs: list[dict]) -> list[dict]:
    rows = []
    for fraction in sorted({r["fraction"] for r in runs}):
        medians = {}
        for tool in TOOLS:
            mine = [r for r in runs if r["fraction"] == fraction and r["tool"] == tool]
            medians[tool] = {"wall_s": statistics.median(r["wall_s"] for r in mine),
                             "cpu_s": statistics.median(r["cpu_s"] for r in mine),
                             "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
                             "peak_tree_pss_mb": max(r["peak_tree_pss_mb"] for r in mine),
                             "others_cores": statistics.median(r["others_cores"] for r in mine),
                             "exit_codes": sorted({r["exit_code"] for r in mine})}
        peer, doctor = medians[PEER], medians["doctor --json"]
        first = next(r for r in runs if r["fraction"] == fraction)
        rows.append({"fraction": fraction, "packets": first["packets"], "mb": round(first["bytes"] / 1e6, 1),
                     "decode": peer, "doctor": doctor,
                     "doctor_over_decode_wall": round(doctor["wall_s"] / peer["wall_s"], 2),
                     "doctor_over_decode_cpu": round(doctor["cpu_s"] / peer["cpu_s"], 2)})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| part | packets | MB | decode wall s | doctor wall s | ×wall | decode cpu s | doctor cpu s | ×cpu "
             "| decode RSS MB | doctor RSS MB | doctor tree MB | others CPUs |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        d, p = r["doctor"], r["decode"]
        lines.append(f"| {r['fraction']:.0%} | {r['packets']:,} | {r['mb']:.1f} | {p['wall_s']:.2f} | {d['wall_s']:.2f} "
                     f"| {r['doctor_over_decode_wall']:.2f} | {p['cpu_s']:.2f} | {d['cpu_s']:.2f} "
                     f"| {r['doctor_over_decode_cpu']:.2f} | {p['peak_rss_mb']:.0f} | {d['peak_rss_mb']:.0f} "
                     f"| {d['peak_tree_pss_mb']:.0f} | {d['others_cores']:.2f} |")
    return "\n".join(lines)


def bench_capture(capture: Path, args, facts: dict, code: Path) -> Path:
    manifest = capture.with_suffix(".manifest.json")
    port = args.port or (json.loads(manifest.read_text()).get("capture", {}).get("port", 9092)
                         if manifest.is_file() else 9092)
    started = time.time()
    facts["load_average"] = os.getloadavg()
    fractions = [float(f) for f in args.fractions.split(",")]
    print(f"{capture.name}: parts {fractions}, {args.repeat} rounds", file=sys.stderr, flush=True)
    runs = measure(capture, port, fractions, args.repeat, code)
    rows = aggregate(runs)
    small, whole = rows[0]["doctor"], rows[-1]["doctor"]
    memory = {"doctor_peak_rss_mb": [small["peak_rss_mb"], whole["peak_rss_mb"]],
              "growth": round(whole["peak_rss_mb"] / small["peak_rss_mb"], 2),
              "packets": [rows[0]["packets"], rows[-1]["packets"]]}
    result = {"benchmark": "doctor", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "seconds": round(time.time() - started, 1), "machine": facts, "load_average_after": os.getloadavg(),
              "capture": {"file": capture.name, "port": port, "packets": count_packets(capture),
                          "bytes": capture.stat().st_size},
              "commands": {tool: argv_for(tool, Path("FILE"), port)[1:] for tool in TOOLS},
              "rows": rows, "memory": memory, "runs": runs}
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime(started))
    out = args.out or RESULTS / f"doctor-{capture.stem}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    line = (f"doctor's peak RSS {memory['doctor_peak_rss_mb'][0]} MB at {memory['packets'][0]:,} packets, "
            f"{memory['doctor_peak_rss_mb'][1]} MB at {memory['packets'][1]:,} (×{memory['growth']})")
    out.with_suffix(".md").write_text(
        f"# doctor benchmark: {capture.name}, {result['date']}\n\nkinspect {facts['kinspect']['commit'][:7]}; "
        f"medians of {args.repeat} interleaved runs; load average {facts['load_average'][0]:.2f} at the start, "
        f"{result['load_average_after'][0]:.2f} at the end\n\n{table(rows)}\n\n- {line}\n")
    print(f"\n{capture.name}\n{table(rows)}\n{line}\nresults: {out}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", nargs="*", type=Path, help="default: both cached lab captures")
    parser.add_argument("--port", type=int, help="the broker's port (default: the manifest's, else 9092)")
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", default="HEAD", help="a git ref, or 'worktree' for the files as they are")
    parser.add_argument("--out", type=Path, help="results JSON; one capture only")
    args = parser.parse_args(argv)
    captures = [c.resolve() for c in args.capture] or list(SHAPES)
    for capture in captures:
        if not capture.is_file():
            parser.error(f"{capture} is missing: record it with {SHAPES.get(capture, 'the lab')}")
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="kinspect-bench-") as code:
        facts["kinspect"] = snapshot_kinspect(Path(code), args.code)
        for capture in captures:
            bench_capture(capture, args, dict(facts), Path(code))
    return 0


if __name__ == "__main__":
    sys.exit(main())
