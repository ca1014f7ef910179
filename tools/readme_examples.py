"""Re-runs the `$ kinspect ...` examples in README.md and puts their real output under them.

    python tools/readme_examples.py           # rewrite README.md
    python tools/readme_examples.py --check   # exit 1 if an example's output is stale

An example is a line `$ kinspect ...` inside a ``` block; its output is every line up to the
next `$ ` line or the end of the block. An output that ends with a line `...` was cut: the same
number of lines is kept. A block right after the line `<!-- example not run -->` is left alone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIP = "<!-- example not run -->"


def run(command: str) -> list[str]:
    shell = command.replace("kinspect ", f"{sys.executable} -m kinspect ", 1)
    result = subprocess.run(shell, shell=True, cwd=REPO, capture_output=True, text=True)
    return result.stdout.rstrip("\n").split("\n")


def rewrite(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    in_block = skip_block = skip_next = False
    while i < len(lines):
        line = lines[i]
        if not in_block and line.strip() == SKIP:
            skip_next = True
        elif not in_block and line.strip() and not line.startswith("```"):
            skip_next = False
        if line.startswith("```"):
            if not in_block:
                skip_block, skip_next = skip_next, False
            in_block = not in_block
            out.append(line)
            i += 1
            continue
        if in_block and not skip_block and line.startswith("$ kinspect "):
            out.append(line)
            i += 1
            old: list[str] = []
            while i < len(lines) and not lines[i].startswith("$ ") and not lines[i].startswith("```"):
                old.append(lines[i])
                i += 1
            trailing_blank = bool(old) and old[-1] == ""
            body = old[:-1] if trailing_blank else old
            cut = bool(body) and body[-1] == "..."
            new = run(line[2:])
            if cut:
                new = new[: len(body) - 1] + ["..."]
            out.extend(new)
            if trailing_blank:
                out.append("")
            continue
        out.append(line)
        i += 1
    return out


def main() -> int:
    readme = REPO / "README.md"
    lines = readme.read_text().split("\n")
    new = rewrite(lines)
    if "--check" in sys.argv:
        if new != lines:
            stale = [n for n, (a, b) in enumerate(zip(lines, new), 1) if a != b][:5]
            print(f"README.md examples are stale (lines {stale}): run python tools/readme_examples.py")
            return 1
        return 0
    readme.write_text("\n".join(new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
