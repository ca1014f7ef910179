"""Prefixes of a capture (its first 10%, 25%, ... of packets), cut with editcap and kept beside it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def count_packets(capture: Path) -> int:
    out = subprocess.run(["capinfos", "-c", "-M", "-T", "-r", str(capture)], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split("\t")[-1])


def fraction_prefix(capture: Path, fraction: float) -> tuple[Path, int]:
    """The first ``fraction`` of the capture's packets (see prefix), and how many they are."""
    total = count_packets(capture)
    packets = max(1, round(total * fraction))
    return prefix(capture, packets, total), packets


def prefix(capture: Path, packets: int, total: int) -> Path:
    """The first `packets` packets of capture; the capture itself when that is all of it.
    Cut once: a prefix newer than its capture is reused."""
    if packets >= total:
        return capture
    out = capture.with_name(f"{capture.stem}.first{packets}{capture.suffix}")
    if out.is_file() and out.stat().st_mtime >= capture.stat().st_mtime:
        return out
    partial = out.with_name(out.name + ".partial")
    fmt = "pcapng" if capture.suffix == ".pcapng" else "pcap"  # editcap writes pcapng unless told
    subprocess.run(["editcap", "-F", fmt, "-r", str(capture), str(partial), f"1-{packets}"], check=True,
                   capture_output=True)
    partial.rename(out)
    return out
