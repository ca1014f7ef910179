"""Where `kinspect decode --json` spends its time, per layer (not a test).

    python tests/bench/profile_decode.py                       # both cached captures (MTU-1500: first 25%)
    python tests/bench/profile_decode.py FILE --fraction 1 --repeat 3

Without FILE: the MTU-1500 capture's first 25% (tools/record_bench_capture.py), the whole
loopback capture (tools/record_loopback_capture.py) and the small-Produce capture's first 25%
(tests/bench/record_small_produce.py), one after the other.

Two views, written to tests/bench/results/profile-<capture>-<date>.json and printed:
- stages: the pipeline cut after each layer (tests/bench/stages.py), one process per run,
  best CPU time of --repeat runs; a layer's cost is its stage minus the stage before. No
  profiler overhead, so these are the numbers to trust.
- cProfile of the real command in one process (-j1, as the stages run), own time folded into
  layers (tests/bench/layers.py), and the top functions. The profiler inflates Python-heavy
  layers; use it for the detail.
- exchange steps: what finishing one exchange costs, step by step (pairing, body decoding,
  records, topic naming, error codes, redaction, filters, JSON assembly, write), per API
  (tests/bench/profile_exchange.py).
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.layers import by_layer, top_functions  # noqa: E402
from tests.bench.measure import child_env, machine_facts, run_child, snapshot_kinspect  # noqa: E402
from tests.bench.prefixes import fraction_prefix  # noqa: E402
from tests.bench.stages import STAGES  # noqa: E402
from tools.record_bench_capture import capture_path  # noqa: E402
from tools.record_loopback_capture import NAME as LOOPBACK_NAME  # noqa: E402
from tests.bench.record_small_produce import NAME as SMALL_PRODUCE_NAME  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
STAGE_LAYERS = {"read": "capture reader", "link": "link", "tcp": "tcp",
                "frames": "frames, headers, pairing", "bodies": "body decode (record sets raw)",
                "records": "records (decompress, parse)", "checks": "record checks",
                "json": "JSON encode", "write": "output write"}
DEFAULT_FRACTIONS = {capture_path(): 0.25, capture_path(name=LOOPBACK_NAME): 1.0,  # the captures without FILE
                     capture_path(name=SMALL_PRODUCE_NAME): 0.25}


def stage_instructions(path: Path, code: Path) -> list[dict]:
    """Each stage's instructions under callgrind (one run each: the count does not depend on the
    machine's load), and what each adds to the one before."""
    from tests.bench.instructions import instructions
    python = str(Path(sys.executable).resolve())  # the real binary: valgrind does not follow shims
    rows, previous = [], 0
    for stage in STAGES:
        count = instructions([python, "-m", "tests.bench.stages", stage, str(path)], code)
        rows.append({"stage": stage, "layer": STAGE_LAYERS[stage], "instructions": count,
                     "adds_instructions": count - previous})
        previous = count
        print(f"  stage {stage:8} {count / 1e9:7.2f} G instructions", file=sys.stderr, flush=True)
    return rows


def stage_costs(path: Path, repeat: int, code: Path) -> list[dict]:
    rows, previous = [], 0.0
    for stage in STAGES:
        best = None
        for _ in range(repeat):
            out = subprocess.run([sys.executable, "-m", "tests.bench.stages", stage, str(path)], cwd=code,
                                 env=child_env(), capture_output=True, text=True, check=True).stdout
            result = json.loads(out)
            if best is None or result["cpu_s"] < best["cpu_s"]:
                best = result
        best["layer"] = STAGE_LAYERS[stage]
        best["adds_cpu_s"] = round(best["cpu_s"] - previous, 3)
        previous = best["cpu_s"]
        rows.append(best)
        print(f"  stage {stage:8} {best['cpu_s']:7.2f} s cpu", file=sys.stderr, flush=True)
    return rows


def full_command(path: Path, repeat: int, code: Path) -> dict:
    runs = [run_child([sys.executable, "-m", "kinspect", "decode", "--json", "-j", "1", str(path)], cwd=code)
            for _ in range(repeat)]
    best = min(runs, key=lambda r: r.cpu_s)
    return best.to_dict()


def exchange_steps(path: Path, repeat: int, code: Path) -> dict:
    """Each step of finishing an exchange, per API (tests/bench/profile_exchange.py)."""
    out = subprocess.run([sys.executable, "-m", "tests.bench.profile_exchange", str(path), "--repeat", str(repeat)],
                         cwd=code, env=child_env(), capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def profile(path: Path, code: Path) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "decode.prof"
        subprocess.run([sys.executable, "-m", "cProfile", "-o", str(out), "-m", "kinspect", "decode", "--json",
                        "-j", "1", str(path)], cwd=code, env=child_env(), stdout=subprocess.DEVNULL, check=True)
        stats = pstats.Stats(str(out))
    layers = by_layer(stats)
    total = sum(layers.values())
    return {"total_s": round(total, 3),
            "layers": [{"layer": k, "own_s": round(v, 3), "share": round(v / total, 3)} for k, v in layers.items()],
            "top_functions": top_functions(stats, 25)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("capture", nargs="*", type=Path,
                        help="default: both cached lab captures (MTU-1500 and loopback)")
    parser.add_argument("--fraction", type=float,
                        help="profile this prefix of the capture (default: 0.25 of the MTU-1500 capture, "
                             "all of the loopback one, else 0.25)")
    parser.add_argument("--repeat", type=int, default=3, help="stage runs; the best CPU time counts")
    parser.add_argument("--code", default="HEAD", help="git ref of the kinspect to profile, or 'worktree'")
    parser.add_argument("--out", type=Path, help="results JSON; one capture only")
    parser.add_argument("--instructions", action="store_true",
                        help="the stages' instructions under callgrind instead of their CPU time (a loaded "
                             "machine moves CPU time, not instruction counts); no cProfile, no exchange steps")
    args = parser.parse_args(argv)
    captures = [c.resolve() for c in args.capture] or [c for c in DEFAULT_FRACTIONS if c.is_file()]
    if not captures:
        parser.error("no capture: record one with sudo python tools/record_bench_capture.py "
                     "(or tools/record_loopback_capture.py)")
    if args.out and len(captures) > 1:
        parser.error("--out names one results file: give one capture")
    facts = machine_facts()
    with tempfile.TemporaryDirectory(prefix="kinspect-profile-") as scratch:
        code = Path(scratch)
        facts["kinspect"] = snapshot_kinspect(code, args.code)
        for capture in captures:
            fraction = args.fraction or DEFAULT_FRACTIONS.get(capture, 0.25)
            profile_capture(capture, fraction, args, dict(facts), code)
    return 0


def profile_capture(capture: Path, fraction: float, args, facts: dict, code: Path) -> Path:
    path, packets = fraction_prefix(capture, fraction)
    started = time.time()
    facts["load_average"] = os.getloadavg()
    if args.instructions:
        return instructions_capture(capture, path, packets, fraction, started, args, facts, code)
    stages = stage_costs(path, args.repeat, code)
    command = full_command(path, args.repeat, code)
    profiled = profile(path, code)
    steps = exchange_steps(path, args.repeat, code)
    result = {"benchmark": "decode profile", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "machine": facts, "load_average_after": os.getloadavg(),
              "capture": {"file": path.name, "of": capture.name, "fraction": fraction, "packets": packets,
                          "bytes": path.stat().st_size},
              "stages": stages, "command": command, "cprofile": profiled, "exchange_steps": steps}
    out = args.out or RESULTS / f"profile-{capture.stem}-{time.strftime('%Y%m%d-%H%M', time.gmtime(started))}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    size = path.stat().st_size
    print(f"\n{path.name}: {packets:,} packets, {size / 1e6:.1f} MB")
    print(f"\n{'layer (stage)':32} {'adds cpu s':>10} {'µs/packet':>10} {'MB/s':>8} {'peak RSS MB':>12}")
    for row in stages:
        rate = size / 1e6 / row["adds_cpu_s"] if row["adds_cpu_s"] > 0 else float("inf")
        print(f"{row['layer']:32} {row['adds_cpu_s']:10.2f} {row['adds_cpu_s'] / packets * 1e6:10.2f} "
              f"{rate:8.0f} {row['peak_rss_mb']:12.1f}")
    print(f"{'whole command -j1 (click, start-up)':32} {command['cpu_s']:10.2f} "
          f"{command['cpu_s'] / packets * 1e6:10.2f} {size / 1e6 / command['cpu_s']:8.0f} "
          f"{command['peak_rss_mb']:12.1f}   (total)")
    print(f"\ncProfile, own time by layer (total {profiled['total_s']:.2f} s under the profiler)")
    for row in profiled["layers"]:
        print(f"  {row['layer']:34} {row['own_s']:8.2f} s {row['share']:6.1%}")
    print("\ntop functions by own time")
    for row in profiled["top_functions"][:15]:
        print(f"  {row['own_s']:7.2f} s {row['calls']:>9,}  {row['function']}  [{row['layer']}]")
    groups = [g for g, n in steps["exchanges"].items() if n]
    counts = ", ".join(f"{g}: {steps['exchanges'][g]:,}" for g in groups)
    print(f"\nper exchange, CPU µs ({counts} exchanges)")
    for name, per in steps["us_per_exchange"].items():
        print(f"  {name:52} " + " ".join(f"{per[g]:8.2f}" for g in groups))
    print(f"  {'all steps':52} " + " ".join(f"{steps['us_per_exchange_total'][g]:8.2f}" for g in groups))
    print(f"\nresults: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}", flush=True)
    return out


def instructions_capture(capture: Path, path: Path, packets: int, fraction: float, started: float, args,
                         facts: dict, code: Path) -> Path:
    stages = stage_instructions(path, code)
    result = {"benchmark": "decode profile (instructions)",
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)), "machine": facts,
              "capture": {"file": path.name, "of": capture.name, "fraction": fraction, "packets": packets,
                          "bytes": path.stat().st_size}, "stages": stages}
    stamp = time.strftime('%Y%m%d-%H%M', time.gmtime(started))
    out = args.out or RESULTS / f"profile-instructions-{capture.stem}-{stamp}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{path.name}: {packets:,} packets, {path.stat().st_size / 1e6:.1f} MB")
    print(f"{'layer (stage)':32} {'adds M instr':>12} {'per packet':>10}")
    for row in stages:
        print(f"{row['layer']:32} {row['adds_instructions'] / 1e6:12.1f} {row['adds_instructions'] / packets:10,.0f}")
    print(f"\nresults: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
