"""Schema-value benchmark (not a test): `decode --json` with schemas against `--raw-values`.

    python tests/bench/bench_schemas.py                      # both cached captures, 5 interleaved rounds
    python tests/bench/bench_schemas.py FILE ... --repeat 7 --code worktree

Issue 33's benchmark. The captures (sudo python tests/bench/record_schema_values.py) hold
≥ 200k values of ~200 bytes each, Avro in one and Protobuf in the other, made by confluent-kafka's
serializers, and the lab registry's `_schemas` records: decode finds the schema in the capture
(no --schemas flag), as it does for a user's capture that saw the registry start. On each
capture, `kinspect decode --json` (values decoded by the schema) and `kinspect decode --json
--raw-values` (the same run schema-less: values as bytes) run in turn, A and B alternating and
the order flipped every round, stdout to /dev/null, both at -j1 (one process: the cost of a
record, not of the hand-off) and, with --jobs, at the default. The machine has 2 CPUs shared with
other work, so the figures are the child's own CPU time (user + sys, os.wait4, workers
included) and its medians; wall time is kept beside them. Per variant: records/s of CPU, CPU µs
per record, peak RSS (largest process) and peak tree PSS (the process and its workers); per
capture the ratio schemas/raw of records per CPU second (issue 33's targets: ≥ 0.5 for Avro,
≥ 0.4 for Protobuf). Writes tests/bench/results/schemas-<date>.json and .md.
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
from tools.record_bench_capture import CACHE  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CAPTURES = {"avro": CACHE / "bench-schema-avro.pcap", "protobuf": CACHE / "bench-schema-protobuf.pcap"}
TARGETS = {"avro": 0.5, "protobuf": 0.4}
RECORD = "sudo python tests/bench/record_schema_values.py"


def variants(jobs: bool) -> dict[str, list[str]]:
    """Variant name -> decode's options before the file."""
    out = {"schemas -j1": ["--json", "-j", "1"], "raw -j1": ["--json", "-j", "1", "--raw-values"]}
    if jobs:
        out.update({"schemas": ["--json"], "raw": ["--json", "--raw-values"]})
    return out


def measure(capture: Path, repeat: int, jobs: bool, codes: dict[str, Path]) -> list[dict]:
    """Every (code, variant) `repeat` times, in one order and then the reverse, alternately."""
    argv_for = variants(jobs)
    pairs = [(ref, name) for ref in codes for name in argv_for]
    runs = []
    for r in range(repeat):
        for ref, name in pairs if r % 2 == 0 else pairs[::-1]:
            argv = [sys.executable, "-m", "kinspect", "decode", *argv_for[name], str(capture)]
            child = run_child(argv, cwd=codes[ref])
            label = name if len(codes) == 1 else f"{name} @{ref}"
            runs.append({"variant": label, "code": ref, "repeat": r,
                         "load_average_1m": round(os.getloadavg()[0], 2), **child.to_dict()})
            print(f"  {capture.stem:24} {label:24} {child.wall_s:7.2f} s wall {child.cpu_s:7.2f} s cpu "
                  f"{child.peak_rss_mb:7.1f} MB {child.peak_tree_pss_mb:7.1f} MB tree  "
                  f"others {child.others_cores:4.2f} CPUs  exit {child.exit_code}", file=sys.stderr, flush=True)
    return runs


def records_in(capture: Path, code: Path) -> dict:
    """Record sets and records (all of them, `_schemas` included) from one untimed validate run,
    and how many values decode showed decoded by a schema, from one untimed decode."""
    counts = {}
    with tempfile.TemporaryFile("w+") as out:
        run_child([sys.executable, "-m", "kinspect", "validate", "--json", str(capture)], stdout=out, cwd=code)
        out.seek(0)
        report = [json.loads(line) for line in out if line.strip()][-1]
        counts.update(records=report.get("records"), batches=report.get("batches"))
    with tempfile.TemporaryFile("w+") as out:
        run_child([sys.executable, "-m", "kinspect", "decode", "--json", "-j", "1", str(capture)],
                  stdout=out, cwd=code)
        out.seek(0)
        counts["values_by_schema"] = sum(line.count('"value_schema":') for line in out)
    return counts


def aggregate(fmt: str, runs: list[dict], counts: dict) -> list[dict]:
    rows = []
    for name in dict.fromkeys(r["variant"] for r in runs):
        mine = [r for r in runs if r["variant"] == name]
        cpu = statistics.median(r["cpu_s"] for r in mine)
        wall = statistics.median(r["wall_s"] for r in mine)
        rows.append({"format": fmt, "variant": name, "runs": len(mine),
                     "exit_codes": sorted({r["exit_code"] for r in mine}),
                     "cpu_s": round(cpu, 3),
                     "cpu_s_range": [min(r["cpu_s"] for r in mine), max(r["cpu_s"] for r in mine)],
                     "wall_s": round(wall, 3), "records_per_cpu_s": round(counts["records"] / cpu),
                     "records_per_wall_s": round(counts["records"] / wall),
                     "us_per_record_cpu": round(cpu / counts["records"] * 1e6, 2),
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in mine),
                     "peak_tree_pss_mb": max(r["peak_tree_pss_mb"] for r in mine),
                     "others_cores": round(statistics.median(r["others_cores"] for r in mine), 2)})
    by_name = {r["variant"]: r for r in rows}
    for row in rows:
        raw = by_name.get(row["variant"].replace("schemas", "raw", 1))
        row["ratio_to_raw"] = round(raw["cpu_s"] / row["cpu_s"], 3) if raw and raw is not row else None
        row["target"] = TARGETS[fmt] if row["ratio_to_raw"] is not None else None
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| capture | variant | CPU s | wall s | records/CPU s | CPU µs/record | ×raw (CPU) | target "
             "| peak RSS MB | tree PSS MB | others' CPUs |", "|" + "---|" * 11]
    for r in rows:
        ratio = "" if r["ratio_to_raw"] is None else f"{r['ratio_to_raw']:.2f}"
        target = "" if r["target"] is None else f"≥ {r['target']}"
        lines.append(f"| {r['format']} | {r['variant']} | {r['cpu_s']:.2f} | {r['wall_s']:.2f} "
                     f"| {r['records_per_cpu_s']:,} | {r['us_per_record_cpu']} | {ratio} | {target} "
                     f"| {r['peak_rss_mb']:,.0f} | {r['peak_tree_pss_mb']:,.0f} | {r['others_cores']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", nargs="*", type=Path,
                        help="captures (default: the two cached ones); the format is read from the name")
    parser.add_argument("--repeat", type=int, default=5, help="rounds per capture; medians are reported")
    parser.add_argument("--jobs", action="store_true", help="also the default -j (worker processes)")
    parser.add_argument("--code", default="HEAD",
                        help="the kinspect to measure: a git ref (default HEAD), or 'worktree'; "
                             "several, comma-separated, are measured interleaved (counts from the last)")
    parser.add_argument("--out", type=Path, help="results JSON (default: tests/bench/results/schemas-<date>.json)")
    args = parser.parse_args(argv)
    captures = {}
    for path in args.capture or CAPTURES.values():
        fmt = next((f for f in TARGETS if f in path.name), None)
        if fmt is None:
            parser.error(f"{path}: name says neither avro nor protobuf")
        if not path.is_file():
            parser.error(f"{path} is missing: record it with {RECORD}")
        captures[fmt] = path.resolve()
    started = time.time()
    facts = machine_facts()
    facts["load_average"] = os.getloadavg()
    rows, results = [], {}
    refs = args.code.split(",")
    with tempfile.TemporaryDirectory(prefix="kinspect-bench-") as work:
        codes = {ref: Path(work) / str(i) for i, ref in enumerate(refs)}
        facts["kinspect"] = {ref: snapshot_kinspect(path, ref) for ref, path in codes.items()}
        for fmt, capture in captures.items():
            counts = records_in(capture, codes[refs[-1]])
            runs = measure(capture, args.repeat, args.jobs, codes)
            mine = aggregate(fmt, runs, counts)
            rows += mine
            manifest = capture.with_name(capture.stem + ".manifest.json")
            results[fmt] = {"file": capture.name, "bytes": capture.stat().st_size, **counts,
                            "manifest": json.loads(manifest.read_text()) if manifest.is_file() else None,
                            "rows": mine, "runs": runs}
    date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
    result = {"benchmark": "schemas", "date": date, "seconds": round(time.time() - started, 1),
              "machine": facts, "load_average_after": os.getloadavg(), "repeat": args.repeat,
              "commands": {name: ["python", "-m", "kinspect", "decode", *opts, "FILE"]
                           for name, opts in variants(args.jobs).items()},
              "captures": results}
    out = args.out or RESULTS / f"schemas-{time.strftime('%Y%m%d-%H%M', time.gmtime(started))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    described = "; ".join(f"{fmt}: {r['file']}, {r['bytes'] / 1e6:.1f} MB, {r['records']:,} records "
                          f"({r['values_by_schema']:,} values decoded by a schema)" for fmt, r in results.items())
    note = ("CPU: the child's user + sys time (workers included), median of the interleaved rounds; "
            "×raw: `--raw-values`' CPU over the schema run's (records/s with schemas as a share of "
            "records/s without); RSS: peak of the largest process; tree PSS: sampled peak of the "
            f"process and its workers; others: CPUs the rest of the machine kept busy, of {facts['nproc']}")
    versions = ", ".join(f"{ref} = {f['commit'][:7]}" + (" + uncommitted" if f.get("uncommitted") else "")
                         for ref, f in facts["kinspect"].items())
    text = (f"# schema-value benchmark, {date}\n\n{described}; kinspect {versions}; "
            f"{args.repeat} rounds, A/B alternating; load average "
            f"{facts['load_average'][0]:.2f} at the start, {result['load_average_after'][0]:.2f} at the end\n\n"
            f"{markdown(rows)}\n\n{note}\n")
    out.with_suffix(".md").write_text(text)
    print(text)
    print(f"results: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
