"""Compare two benchmark result files and flag every figure that got more than 10% worse.

    python tests/bench/compare.py OLD.json NEW.json [--threshold 0.10]

Works on any results/*.json this directory writes: it walks the file for figures it knows the
direction of, by their names. Times (``wall_s``, ``cpu_s``, ``seconds``, ``own_s``, any ``*_s``),
memory (``*_mb``, ``*_mib``) and costs per unit (``us_per_*``) are better lower; rates
(``*_per_s``, ``mb_per_s``) and speed ratios (``speed_vs_*``, ``×tshark``) are better higher.
Rows in lists are matched by what names them (tool, fraction, stage, layer, name...), not by
position; single runs (rows with a ``repeat`` or ``round``) and the machine's facts are not
figures. Figures too small to time (``--floor-seconds``, ``--floor-mb``) are left out.

Prints each file's kinspect commit and machine, a warning when the machines differ, and the
figures that got worse by more than the threshold. Exit 0: none did; 1: some did; 2: the files
could not be read or share no figure. Nothing here runs in CI with a time in it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# subtrees that are facts about the run, not figures of it
SKIPPED = frozenset({"machine", "manifest", "argv", "commands", "command_line", "capture", "segment",
                     "top_functions", "load_average", "load_average_after", "load_average_before",
                     "exit_code", "exit_codes", "all_wall_s", "growth", "method", "date", "when",
                     "others_cpu_s", "machine_busy_cpu_s"})  # the rest of the machine's load, not ours
# what names a row of a list, in the order the label shows them
IDENTITY = ("capture", "file", "fraction", "part", "tool", "stage", "layer", "name", "run", "mode",
            "path", "backend", "kind", "value_size", "size", "rate", "codec", "function")
SINGLE_RUN = ("repeat", "round")
HIGHER = re.compile(r"(per_s|per_cpu_s|speed_vs_\w+|×\w*|x_tshark\w*|throughput\w*)$")
LOWER = re.compile(r"(_s|seconds|_mb|_mib|_gb|^us_per_\w+|^ns_per_\w+|_us|^time_vs_\w+)$")
MEMORY = re.compile(r"(_mb|_mib|_gb)$")


@dataclass(frozen=True)
class Figure:
    value: float
    higher_is_better: bool
    memory: bool


def direction(key: str) -> bool | None:
    """True: higher is better; False: lower is better; None: not a figure compare knows."""
    if HIGHER.search(key):
        return True
    if LOWER.search(key):
        return False
    return None


def figures(result, prefix: str = "") -> dict[str, Figure]:
    """Every figure in a result file, by a path that names it the same way in another run."""
    found: dict[str, Figure] = {}
    if isinstance(result, dict):
        for key, value in result.items():
            if key in SKIPPED or (not prefix and key == "seconds"):  # the benchmark's own duration
                continue
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                way = direction(str(key))
                if way is not None:
                    found[path] = Figure(float(value), way, bool(MEMORY.search(str(key))))
            elif isinstance(value, (dict, list)):
                found.update(figures(value, path))
    elif isinstance(result, list):
        rows = [row for row in result if isinstance(row, dict)]
        if rows and any(key in rows[0] for key in SINGLE_RUN):
            return found
        seen: dict[str, int] = {}
        for i, row in enumerate(result):
            if not isinstance(row, dict):
                continue
            label = _label(row) or str(i)
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:  # rows named alike: keep them apart by their order among them
                label = f"{label}#{seen[label]}"
            found.update(figures(row, f"{prefix}[{label}]"))
    return found


def _label(row: dict) -> str:
    return ", ".join(f"{key}={row[key]}" for key in IDENTITY
                     if isinstance(row.get(key), (str, int, float)) and not isinstance(row.get(key), bool))


def provenance(result: dict) -> dict:
    """The kinspect commit and the machine a result file says it was measured at and on."""
    machine = result.get("machine") if isinstance(result.get("machine"), dict) else {}
    kinspect = machine.get("kinspect") if isinstance(machine.get("kinspect"), dict) else {}
    commit = kinspect.get("commit") or machine.get("commit") or result.get("commit") or result.get("head")
    model = machine.get("cpu_model") or machine.get("platform")
    cpus = machine.get("nproc") or machine.get("cpus")
    subject = result.get("capture") if isinstance(result.get("capture"), dict) else result.get("segment")
    subject = subject if isinstance(subject, dict) else {}
    measured = ", ".join(f"{key} {subject[key]}" for key in ("file", "packets", "bytes") if key in subject)
    runs = result.get("runs") if isinstance(result.get("runs"), list) else []
    others = sorted(r["others_cores"] for r in runs if isinstance(r, dict) and "others_cores" in r)
    return {"commit": commit, "machine": f"{cpus} CPUs, {model}" if model or cpus else None,
            "when": result.get("date") or result.get("when"), "input": measured or None,
            "others": others[len(others) // 2] if others else None}


@dataclass(frozen=True)
class Change:
    path: str
    old: float
    new: float
    higher_is_better: bool

    @property
    def worse_by(self) -> float:
        """How much worse the new figure is, as a fraction of the old (negative: better)."""
        if self.higher_is_better:
            return (self.old - self.new) / self.old if self.old else 0.0
        return (self.new - self.old) / self.old if self.old else 0.0


def compare(old: dict, new: dict, *, floor_seconds: float = 0.05, floor_mb: float = 5.0) -> list[Change]:
    """Every figure in both files and large enough to mean something, old against new."""
    before, after = figures(old), figures(new)
    changes = []
    for path in sorted(before.keys() & after.keys()):
        a, b = before[path], after[path]
        if a.higher_is_better != b.higher_is_better:
            continue
        if not a.higher_is_better:  # a time or a size: below the floor it is noise
            floor = floor_mb if a.memory else floor_seconds
            if max(a.value, b.value) < floor:
                continue
        if a.value <= 0:
            continue
        changes.append(Change(path, a.value, b.value, a.higher_is_better))
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--threshold", type=float, default=0.10, help="flag figures worse by more than this")
    parser.add_argument("--floor-seconds", type=float, default=0.05, help="times below this are not compared")
    parser.add_argument("--floor-mb", type=float, default=5.0, help="sizes below this are not compared")
    parser.add_argument("--all", action="store_true", help="print every figure compared, not only the worse")
    args = parser.parse_args(argv)
    results = []
    for path in (args.old, args.new):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError) as e:
            print(f"compare: cannot read {path}: {e}", file=sys.stderr)
            return 2
        if not isinstance(results[-1], dict):
            print(f"compare: {path} is not a benchmark result (a JSON object)", file=sys.stderr)
            return 2
    old, new = results
    facts = [provenance(old), provenance(new)]
    for label, path, fact in (("old", args.old, facts[0]), ("new", args.new, facts[1])):
        print(f"{label}: {path.name}: kinspect {fact['commit'][:12] if fact['commit'] else 'commit not recorded'}, "
              f"{fact['machine'] or 'machine not recorded'}, {fact['when'] or 'date not recorded'}"
              + ("" if fact["others"] is None else f", others kept {fact['others']} CPUs busy (median)"))
    if facts[0]["machine"] != facts[1]["machine"]:
        print("warning: the machines differ, so the figures may too")
    if facts[0]["input"] != facts[1]["input"]:
        print(f"warning: the inputs differ ({facts[0]['input']}; {facts[1]['input']})")
    changes = compare(old, new, floor_seconds=args.floor_seconds, floor_mb=args.floor_mb)
    if not changes:
        print("compare: the files share no figure", file=sys.stderr)
        return 2
    worse = [c for c in changes if c.worse_by > args.threshold]
    shown = changes if args.all else worse
    for change in shown:
        mark = "WORSE" if change in worse else "     "
        print(f"{mark} {change.path}: {change.old:g} -> {change.new:g} "
              f"({'+' if change.worse_by >= 0 else '-'}{abs(change.worse_by):.0%} "
              f"{'worse' if change.worse_by >= 0 else 'better'})")
    print(f"{len(changes)} figures compared, {len(worse)} more than {args.threshold:.0%} worse")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
