"""Figures for the README (issue 10, part 6): every command on every hostile input, with wall
time, CPU time, peak RSS, exit code and output size.

    python tests/bench/hostile.py [--ref HEAD|worktree|installed] [--only TEXT ...]
                                  [--scale full|ci] [--timeout 60] [--no-limit] [--inputs DIR]

Inputs are made by tests/hostile/inputs.py at the sizes issue 10 names (--scale ci: the
smaller ones of the tests), into a temporary directory, or --inputs DIR, kept and reused. Each run is the one tests/integration/test_hostile.py makes: a subprocess under
ulimit -v (512 MiB + 64 MiB; --no-limit lifts it, to see what a run would take), stdout read
and scanned, never kept. The code measured is a snapshot of kinspect at --ref (default HEAD,
built as pip would; "installed" runs the package the interpreter imports), since others keep
editing the tree. A run's problems are those the test reports (tests/hostile/cases.py).

Writes tests/bench/results/hostile-<UTC time>.json (every run, the machine's facts, the
snapshot) and .md (one table per input class, and the whole matrix), and prints the markdown.
Not collected by pytest; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, snapshot_kinspect  # noqa: E402
from tests.hostile import cases, runner  # noqa: E402

RESULTS = REPO / "tests" / "bench" / "results"
MIB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="HEAD", help="git ref, worktree, or installed")
    parser.add_argument("--only", nargs="*", default=[], help="inputs or commands containing TEXT")
    parser.add_argument("--scale", choices=("full", "ci"), default="full")
    parser.add_argument("--timeout", type=float, default=runner.HANG_TIMEOUT)
    parser.add_argument("--no-limit", action="store_true", help="no ulimit -v")
    parser.add_argument("--inputs", type=Path, help="make inputs here once and reuse them")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kinspect-hostile-") as scratch:
        scratch = Path(scratch)
        snapshot = None
        facts = {"ref": "installed"}
        if args.ref != "installed":
            snapshot = scratch / "snapshot"
            facts = snapshot_kinspect(snapshot, args.ref)
        inputs_dir = (args.inputs or scratch / "inputs").resolve()
        inputs_dir.mkdir(parents=True, exist_ok=True)
        rows = measure(inputs_dir, snapshot, args, scratch)
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime())
    result = {"kinspect": facts, "machine": machine_facts(), "scale": args.scale,
              "timeout_s": args.timeout,
              "address_space_limit_mib": None if args.no_limit else runner.ADDRESS_SPACE_LIMIT // MIB,
              "runs": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"hostile-{stamp}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (RESULTS / f"hostile-{stamp}.md").write_text(text)
    print(text)
    print(f"written: tests/bench/results/hostile-{stamp}.json and .md", file=sys.stderr)


def measure(inputs_dir: Path, snapshot: Path | None, args, scratch: Path) -> list[dict]:
    rows = []
    made: dict[str, tuple[Path, float, int]] = {}
    for name, command in cases.matrix():
        if args.only and not any(text in name or text in command for text in args.only):
            continue
        hostile = cases.BY_NAME[name]
        if name not in made:
            made[name] = _make(hostile, inputs_dir, args.scale)
        path, make_s, size = made[name]
        junit = scratch / "report.xml"
        junit.unlink(missing_ok=True)
        run = runner.run(cases.arguments(hostile, command, path, junit), timeout=args.timeout,
                         terminal=cases.is_terminal(command), cwd=snapshot,
                         memory_limit=not args.no_limit)
        problems = cases.problems(hostile, command, run, junit if "junit" in command else None)
        rows.append({
            "input": name, "command": command, "input_bytes": size, "make_s": round(make_s, 2),
            "args": [a.decode("utf-8", "backslashreplace") if isinstance(a, bytes) else a
                     for a in run.args],
            "exit_code": run.exit_code, "signal": run.signal, "timed_out": run.timed_out,
            "wall_s": round(run.wall, 3), "cpu_s": round(run.cpu, 3),
            "peak_rss_mib": round(run.peak_rss / MIB, 1), "tree_pss_mib": round(run.tree_pss / MIB, 1),
            "stdout_bytes": run.stdout.size, "stderr_bytes": run.stderr.size,
            "options_named": sorted(run.stdout.options | run.stderr.options),
            "problems": problems, "stderr_tail": run.crash_head() if problems else "",
        })
        verdict = "ok" if not problems else "FAIL " + "; ".join(problems)[:160]
        print(f"{name:32s} {command:20s} exit {run.exit_code!s:>4s} {run.wall:7.2f} s "
              f"{run.peak_rss / MIB:6.0f} MiB  {verdict}", file=sys.stderr, flush=True)
    return rows


def _make(hostile: cases.Hostile, inputs_dir: Path, scale: str) -> tuple[Path, float, int]:
    """The input, made once (kept in inputs_dir when it already holds it)."""
    inputs_dir = inputs_dir / scale
    inputs_dir.mkdir(exist_ok=True)
    marker = inputs_dir / f".{hostile.name}.path"
    if marker.exists():
        path = Path(marker.read_bytes().decode("utf-8", "surrogateescape"))
        if path.exists():
            return path, 0.0, _size(path)
    started = time.monotonic()
    path = hostile.make(inputs_dir, scale)
    marker.write_bytes(str(path).encode("utf-8", "surrogateescape"))
    return path, time.monotonic() - started, _size(path)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def markdown(result: dict) -> str:
    runs = result["runs"]
    k = result["kinspect"]
    limit = result["address_space_limit_mib"]
    lines = [f"# kinspect on hostile inputs ({k.get('commit', k['ref'])[:12]}, {k['ref']})", "",
             f"{len(runs)} runs at the {result['scale']} scale, "
             f"{sum(not r['problems'] for r in runs)} passed; "
             f"ulimit -v {f'{limit} MiB' if limit else 'none'}, hang timeout {result['timeout_s']:.0f} s; "
             f"{result['machine']['nproc']} CPUs, {result['machine']['cpu_model']}.", "",
             "## Worst run per input", "",
             "| input | size | runs | failed | max wall s | max CPU s | max peak RSS MiB | "
             "max tree PSS MiB | exit codes |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in dict.fromkeys(r["input"] for r in runs):
        mine = [r for r in runs if r["input"] == name]
        codes = sorted({_exit(r) for r in mine})
        lines.append(f"| {name} | {_bytes(mine[0]['input_bytes'])} | {len(mine)} | "
                     f"{sum(bool(r['problems']) for r in mine)} | "
                     f"{max(r['wall_s'] for r in mine):.2f} | {max(r['cpu_s'] for r in mine):.2f} | "
                     f"{max(r['peak_rss_mib'] for r in mine):.0f} | "
                     f"{max(r['tree_pss_mib'] for r in mine):.0f} | {', '.join(codes)} |")
    lines += ["", "## Every run", "",
              "| input | command | exit | wall s | CPU s | peak RSS MiB | tree PSS MiB | "
              "output bytes | problems |",
              "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in runs:
        problems = "; ".join(r["problems"]).replace("|", "\\|").replace("\n", " ")[:200]
        lines.append(f"| {r['input']} | {r['command']} | {_exit(r)} | {r['wall_s']:.2f} | "
                     f"{r['cpu_s']:.2f} | {r['peak_rss_mib']:.0f} | {r['tree_pss_mib']:.0f} | "
                     f"{r['stdout_bytes']} | {problems or 'ok'} |")
    return "\n".join(lines) + "\n"


def _exit(row: dict) -> str:
    if row["timed_out"]:
        return "hang"
    if row["signal"]:
        return f"signal {row['signal']}"
    return str(row["exit_code"])


def _bytes(n: int) -> str:
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


if __name__ == "__main__":
    main()
