"""Regenerate the committed captures in pcaps/ from real clients and a real broker (Tansu).

    sudo python tools/record_pcaps.py                      # every recipe
    sudo python tools/record_pcaps.py --only aiokafka-mtu1500

Each recipe (tests/lab/recipes.py) starts a fresh in-memory Tansu broker, on loopback or in a
pair of lab-made network namespaces joined by an MTU 1500 veth, captures with tcpdump or
dumpcap, runs its client scripts, and writes <name>.<pcap|pcapng> plus <name>.manifest.json.
Needs root (namespaces, capture), tcpdump, dumpcap, capinfos, tshark, ip.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab import fixture_readme  # noqa: E402
from tests.lab.recipes import BY_NAME, RECIPES, record  # noqa: E402

MAX_FILE_BYTES = 300 * 1024
MAX_TOTAL_BYTES = 2 * 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), metavar="NAME",
                        help="record just this recipe (repeatable); names: " + ", ".join(BY_NAME))
    parser.add_argument("--out", type=Path, default=REPO / "pcaps")
    parser.add_argument("--logs", type=Path, help="keep the clients' debug logs here")
    parser.add_argument("--readme-only", action="store_true",
                        help="only rewrite README.md from the manifests already there")
    args = parser.parse_args(argv)
    if args.readme_only:
        write_readme(args.out)
        return 0
    if os.geteuid() != 0:
        parser.error("needs root: network namespaces and packet capture")
    recipes = [BY_NAME[n] for n in args.only] if args.only else list(RECIPES)
    if record_all(recipes, record, args.out, args.logs):
        return 1
    write_readme(args.out)
    total = sum(p.stat().st_size for p in args.out.glob("*.pcap*"))
    print(f"{'total':40} {total:>8} bytes")
    if total > MAX_TOTAL_BYTES:
        print(f"captures total {total} bytes, over {MAX_TOTAL_BYTES}", file=sys.stderr)
        return 1
    return 0


def record_all(recipes, record, out: Path, logs: Path | None) -> int:
    """Records each recipe in a scratch directory and moves capture and manifest to ``out``;
    1 as soon as a capture is too big to keep, else 0. Shared with record_legacy_pcaps.py."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kinspect-lab-") as scratch:
        for recipe in recipes:
            log_dir = logs / recipe.name if logs else Path(scratch) / "logs" / recipe.name
            manifest = record(recipe, Path(scratch), log_dir=log_dir)
            capture = Path(scratch) / recipe.filename
            size = capture.stat().st_size
            if size > MAX_FILE_BYTES:
                print(f"{recipe.filename}: {size} bytes is over {MAX_FILE_BYTES}; not kept",
                      file=sys.stderr)
                return 1
            shutil.move(capture, out / recipe.filename)
            shutil.move(manifest, out / manifest.name)
            print(f"{recipe.filename:40} {size:>8} bytes")
    return 0


def write_readme(directory: Path) -> None:
    manifests = [json.loads(p.read_text()) for p in sorted(directory.glob("*.manifest.json"))]
    manifests.sort(key=lambda m: (m["file"] != fixture_readme.DEMO, m["file"]))
    (directory / "README.md").write_text(fixture_readme.render(manifests))


if __name__ == "__main__":
    sys.exit(main())
