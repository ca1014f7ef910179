"""Decode benchmark (not a test): kinspect decode against tshark on the same capture, in one run.

    python tests/bench/bench_decode.py                       # the three cached lab captures, one after the other
    python tests/bench/bench_decode.py FILE --port 9092 --fractions 0.1,1 --repeat 3

The two capture shapes of issue 11: the MTU-1500 capture (1M packets of 1.5 KB; record it with
sudo python tools/record_bench_capture.py) and the loopback capture (≥ 300 MB in segments of
4-64 KB; sudo python tools/record_loopback_capture.py), and issue 36's small-Produce capture
(librdkafka at its defaults: ≥ 25k Produce requests of 2-8 KB; sudo python
tests/bench/record_small_produce.py). On each, every tool decodes the first
10%, 25%, 50% and 100% of the capture's packets (prefixes cut with editcap) with stdout to
/dev/null, tools interleaved; per run: wall time, the child's own CPU time and peak RSS
(os.wait4), packets/s and MB/s of capture, and the CPU the rest of the machine used meanwhile.
Ratios are tshark's time over the tool's, so 2.0 means twice tshark's speed. Beside the per-byte
figures, CPU per exchange and per record (the capture's exchanges from an untimed --summary run,
its records from an untimed validate run, which counts every record of every record set): on
many small requests the cost per exchange is what users meet. Prints a table per
capture and writes tests/bench/results/decode-<capture>-<date>.json (and .md) with the machine's
facts.
"""

from __future__ import annotations

import argparse
import json
import math
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
from tools.record_bench_capture import capture_path, manifest_path  # noqa: E402
from tools.record_loopback_capture import NAME as LOOPBACK_NAME  # noqa: E402
from tests.bench.record_small_produce import NAME as SMALL_PRODUCE_NAME  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
FRACTIONS = (0.1, 0.25, 0.5, 1.0)
PEER = "tshark"
DEFAULT_TOOLS = (PEER, "tshark -V", "kinspect --json", "kinspect --json -j1", "kinspect --json -j2")
SHAPES = {  # the cached captures a run without FILE measures, and how to record each
    capture_path(): "sudo python tools/record_bench_capture.py",
    capture_path(name=LOOPBACK_NAME): "sudo python tools/record_loopback_capture.py",
    capture_path(name=SMALL_PRODUCE_NAME): "sudo python tests/bench/record_small_produce.py",
}


def commands(port: int) -> dict[str, callable]:
    """Tool name → argv for a capture file. tshark's is the one issue 3 names; "tshark -V" (every
    field of every packet printed, as kinspect --json prints every field) runs only when asked.
    kinspect decodes bodies on every CPU by default; -j1 is the single-process figure, -j2 two
    workers whatever the default would choose; "pure-Python"
    (only when asked) runs without the C accelerators of kinspect/native."""
    kinspect = [sys.executable, "-m", "kinspect", "decode"] + ([] if port == 9092 else ["--port", str(port)])
    return {
        PEER: lambda f: ["tshark", "-r", str(f), "-d", f"tcp.port=={port},kafka", "-T", "fields",
                         "-e", "kafka.api_key", "-e", "kafka.correlation_id"],
        "tshark -V": lambda f: ["tshark", "-r", str(f), "-d", f"tcp.port=={port},kafka", "-V"],
        "kinspect --json": lambda f: [*kinspect, "--json", str(f)],
        "kinspect --json -j1": lambda f: [*kinspect, "--json", "-j", "1", str(f)],
        "kinspect --json -j2": lambda f: [*kinspect, "--json", "-j", "2", str(f)],
        "kinspect --summary": lambda f: [*kinspect, "--summary", "--json", str(f)],
        "kinspect --json -j1 pure-Python": lambda f: ["env", "KINSPECT_PURE_PYTHON=1", *kinspect, "--json",
                                                      "-j", "1", str(f)],
    }


def measure(capture: Path, port: int, fractions, repeat: int, tools: list[str], code: Path) -> tuple[list, list]:
    """Every (fraction, tool) run `repeat` times, tools interleaved (order rotated per round) so
    that a busy moment on the machine does not land on one tool only. kinspect runs from `code`."""
    total = count_packets(capture)
    argv_for = commands(port)
    runs, summary_rows = [], []
    for fraction in fractions:
        packets = max(1, round(total * fraction))
        path = prefix(capture, packets, total)
        size = path.stat().st_size
        for r in range(repeat):
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            for tool in order:
                argv = argv_for[tool](path)
                load = os.getloadavg()[0]
                if tool == "kinspect --summary":
                    with tempfile.TemporaryFile("w+") as out:
                        child = run_child(argv, stdout=out, cwd=code)
                        out.seek(0)
                        rows = [json.loads(line) for line in out]
                    if fraction == fractions[-1]:
                        summary_rows = rows
                else:
                    child = run_child(argv, cwd=code)
                runs.append({"fraction": fraction, "packets": packets, "bytes": size, "tool": tool,
                             "repeat": r, "load_average_1m": round(load, 2), "argv": _shown(argv),
                             **child.to_dict()})
                print(f"  {fraction:>5.0%} {tool:20} {child.wall_s:8.2f} s wall {child.cpu_s:8.2f} s cpu "
                      f"{child.peak_rss_mb:8.1f} MB {child.peak_tree_pss_mb:8.1f} MB tree  others {child.others_cores:4.2f} CPUs  "
                      f"exit {child.exit_code}",
                      file=sys.stderr, flush=True)
    return runs, summary_rows


def _shown(argv: list[str]) -> list[str]:
    return ["python" if a == sys.executable else Path(a).name if os.sep in a else a for a in argv]


def aggregate(runs: list[dict]) -> list[dict]:
    """Median over repeats per (fraction, tool), with rates and ratios against the peer."""
    rows = []
    keys = sorted({(r["fraction"], r["tool"]) for r in runs}, key=lambda k: (k[0], k[1] != PEER, k[1]))
    for fraction, tool in keys:
        mine = [r for r in runs if r["fraction"] == fraction and r["tool"] == tool]
        wall = statistics.median(r["wall_s"] for r in mine)
        cpu = statistics.median(r["cpu_s"] for r in mine)
        packets, size = mine[0]["packets"], mine[0]["bytes"]
        rows.append({"fraction": fraction, "tool": tool, "packets": packets, "mb": round(size / 1e6, 1),
                     "runs": len(mine), "exit_codes": sorted({r["exit_code"] for r in mine}),
                     "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                     "packets_per_s": round(packets / wall), "mb_per_s": round(size / 1e6 / wall, 2),
                     "packets_per_cpu_s": round(packets / cpu),
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
                     "peak_tree_pss_mb": max(r.get("peak_tree_pss_mb", 0) for r in mine),
                     "others_cores": round(statistics.median(r.get("others_cores", 0) for r in mine), 2)})
    peers = {r["fraction"]: r for r in rows if r["tool"] == PEER}
    for row in rows:
        peer = peers.get(row["fraction"])
        row["speed_vs_tshark_wall"] = round(peer["wall_s"] / row["wall_s"], 2) if peer else None
        row["speed_vs_tshark_cpu"] = round(peer["cpu_s"] / row["cpu_s"], 2) if peer else None
    return rows


def growth(rows: list[dict]) -> dict:
    """Per tool, from the smallest to the largest prefix: the exponent b in time ∝ packets^b
    (1.0 is linear) and how peak RSS grew."""
    out = {}
    for tool in sorted({r["tool"] for r in rows}):
        mine = sorted((r for r in rows if r["tool"] == tool), key=lambda r: r["packets"])
        if len(mine) < 2:
            continue
        first, last = mine[0], mine[-1]
        scale = last["packets"] / first["packets"]
        out[tool] = {
            "packets": [first["packets"], last["packets"]],
            "cpu_exponent": round(math.log(last["cpu_s"] / first["cpu_s"]) / math.log(scale), 2),
            "wall_exponent": round(math.log(last["wall_s"] / first["wall_s"]) / math.log(scale), 2),
            "peak_rss_mb": [r["peak_rss_mb"] for r in mine],
            "peak_rss_growth": round(last["peak_rss_mb"] / first["peak_rss_mb"], 2),
            "peak_tree_pss_mb": [r["peak_tree_pss_mb"] for r in mine],
            "us_per_packet_cpu": [round(r["cpu_s"] / r["packets"] * 1e6, 2) for r in mine],
        }
    return out


COLUMNS = (("fraction", "{:>5.0%}"), ("tool", "{:<20}"), ("packets", "{:>9,}"), ("mb", "{:>8.1f}"),
           ("wall_s", "{:>8.2f}"), ("cpu_s", "{:>8.2f}"), ("packets_per_s", "{:>9,}"),
           ("mb_per_s", "{:>7.2f}"), ("us_per_exchange_cpu", "{:>8}"), ("us_per_record_cpu", "{:>8}"),
           ("peak_rss_mb", "{:>8.1f}"), ("peak_tree_pss_mb", "{:>8.1f}"), ("speed_vs_tshark_wall", "{:>6}"),
           ("speed_vs_tshark_cpu", "{:>6}"), ("others_cores", "{:>6.2f}"))
HEADINGS = ("part", "tool", "packets", "MB", "wall s", "cpu s", "pkts/s", "MB/s", "µs/exch", "µs/rec", "RSS MB", "tree MB",
            "×wall", "×cpu", "others")


def table(rows: list[dict]) -> str:
    widths = [len(fmt.format(rows[0][key])) if rows else 8 for key, fmt in COLUMNS]
    lines = ["  ".join(h.rjust(w) if i not in (1,) else h.ljust(w)
                       for i, (h, w) in enumerate(zip(HEADINGS, widths)))]
    for row in rows:
        lines.append("  ".join(fmt.format(row[key]) for key, fmt in COLUMNS))
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    """The table for tests/bench/README.md: medians, ratios against tshark, the others' load."""
    lines = ["| part | tool | wall s | cpu s | pkts/s (wall) | MB/s (wall) | CPU µs/exchange | CPU µs/record "
             "| CPU ns/byte | peak RSS MB | tree PSS MB | ×tshark wall | ×tshark cpu | others' CPUs |",
             "|" + "---|" * 14]
    for r in rows:
        lines.append(f"| {r['fraction']:.0%} | {r['tool']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} "
                     f"| {r['packets_per_s']:,} | {r['mb_per_s']:.1f} | {r.get('us_per_exchange_cpu')} "
                     f"| {r.get('us_per_record_cpu')} | {r.get('ns_per_byte_cpu')} | {r['peak_rss_mb']:,.0f} "
                     f"| {r['peak_tree_pss_mb']:,.0f} | {r['speed_vs_tshark_wall']} | {r['speed_vs_tshark_cpu']} "
                     f"| {r.get('others_cores', 0):.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", nargs="*", type=Path,
                        help="captures to measure, one after the other (default: both cached lab captures)")
    parser.add_argument("--port", type=int, help="the broker's port (default: the manifest's, else 9092)")
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)))
    parser.add_argument("--repeat", type=int, default=3, help="runs per (fraction, tool); medians are reported")
    parser.add_argument("--tools", default=",".join(DEFAULT_TOOLS), help="comma-separated, from: " + ", ".join(commands(9092)))
    parser.add_argument("--code", default="HEAD",
                        help="the kinspect to measure: a git ref (default HEAD), or 'worktree' for the files as they are")
    parser.add_argument("--out", type=Path, help="results JSON (default: tests/bench/results/...); one capture only")
    args = parser.parse_args(argv)
    captures = [c.resolve() for c in args.capture] or list(SHAPES)  # the tools run in the snapshot's directory
    for capture in captures:
        if not capture.is_file():
            parser.error(f"{capture} is missing: record it with {SHAPES.get(capture, 'the lab')}")
    if args.out and len(captures) > 1:
        parser.error("--out names one results file: give one capture")
    tools = args.tools.split(",")
    unknown = set(tools) - set(commands(9092))
    if unknown:
        parser.error(f"unknown tools {sorted(unknown)}")
    fractions = [float(f) for f in args.fractions.split(",")]
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="kinspect-bench-") as code:
        facts["kinspect"] = snapshot_kinspect(Path(code), args.code)  # one version of the code for all captures
        for capture in captures:
            bench_capture(capture, args, tools, fractions, dict(facts), Path(code))
    return 0


def bench_capture(capture: Path, args, tools: list[str], fractions: list[float], facts: dict, code: Path) -> Path:
    manifest = _manifest(capture)
    port = args.port or manifest.get("capture", {}).get("port", 9092)
    started = time.time()
    facts["load_average"] = os.getloadavg()
    print(f"{capture.name}: {', '.join(tools)}; parts {fractions}, {args.repeat} rounds", file=sys.stderr, flush=True)
    runs, summary_rows = measure(capture, port, fractions, args.repeat, tools, code)
    if not summary_rows:
        summary_rows = _api_mix(capture, port, code)
    rows = aggregate(runs)
    counts = {}
    for fraction in fractions:
        part = next(r for r in runs if r["fraction"] == fraction)
        counts[fraction] = _counts(prefix(capture, part["packets"], count_packets(capture)), port, code)
    per_unit(rows, counts)
    result = {"benchmark": "decode", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "seconds": round(time.time() - started, 1), "machine": facts,
              "load_average_after": os.getloadavg(),
              "capture": {"file": capture.name, "port": port, "packets": count_packets(capture),
                          "bytes": capture.stat().st_size, "manifest": _manifest_digest(manifest),
                          "exchanges_by_api": [r for r in summary_rows if "count" in r and "error" not in r],
                          "counts_by_part": {str(f): c for f, c in counts.items()}},
              "commands": {tool: _shown(commands(port)[tool]("FILE")) for tool in tools},
              "rows": rows, "growth": growth(rows), "runs": runs}
    out = args.out or RESULTS / f"decode-{capture.stem}-{time.strftime('%Y%m%d-%H%M', time.gmtime(started))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    growth_lines = [f"{tool}: cpu ∝ packets^{g['cpu_exponent']}, wall ∝ packets^{g['wall_exponent']}, "
                    f"peak RSS {g['peak_rss_mb']} MB (×{g['peak_rss_growth']} from {g['packets'][0]:,} to "
                    f"{g['packets'][1]:,} packets), tree PSS {g['peak_tree_pss_mb']} MB"
                    for tool, g in result["growth"].items()]
    note = ("RSS MB: peak of the largest process (wait4); tree MB: sampled peak PSS of the process and its "
            "workers; others: CPUs the rest of the machine kept busy meanwhile (median), out of "
            f"{facts['nproc']}")
    out.with_suffix(".md").write_text(
        f"# decode benchmark: {capture.name}, {result['date']}\n\n{count_packets(capture):,} packets, "
        f"{capture.stat().st_size / 1e6:,.1f} MB; kinspect {facts['kinspect']['commit'][:7]}; medians of "
        f"{args.repeat} interleaved runs; load average {facts['load_average'][0]:.2f} at the start, "
        f"{result['load_average_after'][0]:.2f} at the end\n\n{markdown(rows)}\n\n"
        + "\n".join(f"- {line}" for line in growth_lines) + f"\n\n{note}\n")
    print(f"\n{capture.name}")
    print(table(rows))
    print("\n".join(growth_lines))
    print(note)
    print(f"results: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}", flush=True)
    return out


def per_unit(rows: list[dict], counts: dict[float, dict]) -> None:
    """CPU per exchange, per record and per byte of capture, beside each row's rates."""
    for row in rows:
        count = counts.get(row["fraction"], {})
        cpu = row["cpu_s"]
        row["exchanges"], row["records"] = count.get("exchanges"), count.get("records")
        row["us_per_exchange_cpu"] = round(cpu / count["exchanges"] * 1e6, 2) if count.get("exchanges") else None
        row["us_per_record_cpu"] = round(cpu / count["records"] * 1e6, 3) if count.get("records") else None
        row["ns_per_byte_cpu"] = round(cpu / (row["mb"] * 1e6) * 1e9, 3) if row["mb"] else None


def _counts(path: Path, port: int, code: Path) -> dict:
    """Exchanges (all, and Produce) from one untimed --summary run, record sets, batches and
    records from one untimed validate run (it counts every record of every record set)."""
    rows = _api_mix(path, port, code)
    exchanges = [r for r in rows if r.get("type") == "summary" and "count" in r]
    argv = [sys.executable, "-m", "kinspect", "validate", "--json", str(path)]
    with tempfile.TemporaryFile("w+") as out:
        run_child(argv, stdout=out, cwd=code)
        out.seek(0)
        report = [json.loads(line) for line in out if line.strip()][-1]
    return {"exchanges": sum(r["count"] for r in exchanges),
            "produce_exchanges": sum(r["count"] for r in exchanges if r.get("api_name") == "Produce"),
            "record_sets": report.get("record_sets"), "batches": report.get("batches"),
            "records": report.get("records")}


def _api_mix(capture: Path, port: int, code: Path) -> list[dict]:
    """Exchanges per API in the whole capture, from one untimed `kinspect decode --summary` run."""
    argv = [sys.executable, "-m", "kinspect", "decode", "--summary", "--json", str(capture)]
    if port != 9092:
        argv[4:4] = ["--port", str(port)]
    with tempfile.TemporaryFile("w+") as out:
        run_child(argv, stdout=out, cwd=code)
        out.seek(0)
        return [json.loads(line) for line in out if line.strip()]


def _manifest(capture: Path) -> dict:
    path = capture.with_name(capture.stem + ".manifest.json")
    if capture == capture_path():
        path = manifest_path()
    elif capture == capture_path(name=LOOPBACK_NAME):
        path = manifest_path(name=LOOPBACK_NAME)
    return json.loads(path.read_text()) if path.is_file() else {}


def _manifest_digest(manifest: dict) -> dict:
    """What the capture is, without the per-round detail."""
    if not manifest:
        return {}
    rounds = manifest.get("rounds", [])
    produced = sum(c["delivered"] for r in rounds for c in r["produced"].values())
    return {"summary": manifest.get("summary"), "command": manifest.get("command"),
            "broker": manifest.get("broker"), "capture": manifest.get("capture"),
            "file_info": manifest.get("file_info"), "rounds": len(rounds),
            "clients": rounds[0]["versions"] if rounds else None,
            "codecs": sorted(rounds[0]["produced"]) if rounds else None,
            "messages_delivered": produced, "messages_consumed": sum(r["consumed"] for r in rounds),
            "commits": sum(r["commits"] for r in rounds),
            "value_size": rounds[0]["value_size"] if rounds else None,
            **({"wire": manifest["wire"]} if "wire" in manifest else {})}


if __name__ == "__main__":
    sys.exit(main())
