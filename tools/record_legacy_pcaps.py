"""Record pcaps/kafka39-*.pcap* and pcaps/kafka41-*: real clients against Apache Kafka.

    sudo python tools/record_legacy_pcaps.py                       # every recipe
    sudo python tools/record_legacy_pcaps.py --only kafka39-legacy

The recipes (tests/lab/legacy_recipes.py) start Apache Kafka 3.9.2 in ZooKeeper mode with the
legacy message formats (magic 0/1) for kafka-python pinned to old protocol levels, or Apache
Kafka 4.1.2 (KRaft) for librdkafka, on loopback or in lab-made namespaces joined by an MTU 1500
veth, capture with tcpdump or dumpcap, and write <name>.<pcap|pcapng> plus
<name>.kafka-manifest.json. Then pcaps/kafka39-README.md is rewritten from the manifests and the
section of pcaps/README.md that lists these files is brought up to date.
Needs root, Java 17 and Maven (the Kafka jars), tcpdump, dumpcap, capinfos, tshark, ip.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.lab import legacy_readme  # noqa: E402
from tests.lab.legacy_recipes import BY_NAME, RECIPES, manifest_name, record  # noqa: E402
from tools.record_pcaps import record_all  # noqa: E402

MAX_FILE_BYTES = 300 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(BY_NAME), metavar="NAME",
                        help="record just this recipe (repeatable); names: " + ", ".join(BY_NAME))
    parser.add_argument("--out", type=Path, default=REPO / "pcaps")
    parser.add_argument("--logs", type=Path, help="keep the clients' debug logs here")
    parser.add_argument("--readme-only", action="store_true",
                        help="only rewrite the READMEs from the manifests already there")
    args = parser.parse_args(argv)
    if not args.readme_only:
        if os.geteuid() != 0:
            parser.error("needs root: network namespaces and packet capture")
        recipes = [BY_NAME[n] for n in args.only] if args.only else list(RECIPES)
        if record_all(recipes, record, args.out, args.logs):
            return 1
    write_readmes(args.out)
    return 0


def write_readmes(directory: Path) -> None:
    names = [r.name for r in RECIPES]
    manifests = [json.loads(p.read_text()) for name in names
                 if (p := directory / manifest_name(name)).exists()]
    (directory / legacy_readme.FILE).write_text(legacy_readme.render(manifests))
    main_readme = directory / "README.md"
    text = main_readme.read_text() if main_readme.exists() else ""
    main_readme.write_text(legacy_readme.with_pointer_section(text, manifests))


if __name__ == "__main__":
    sys.exit(main())
