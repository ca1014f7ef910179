"""What a capture file really is, per Wireshark's tools (capinfos, tshark): an independent check
that the lab recorded the format and link type it meant to."""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

# capinfos short names → what the README and manifests call them
LINK_TYPES = {"ether": "EN10MB (Ethernet)", "linux-sll2": "LINUX_SLL2 (Linux cooked v2)",
              "linux-sll": "LINUX_SLL (Linux cooked v1)", "null": "NULL (BSD loopback)"}


@dataclass(frozen=True)
class CaptureInfo:
    format: str          # "pcap" or "pcapng"
    encapsulation: str   # capinfos name: "ether", "linux-sll2", ...
    packets: int
    max_frame_len: int
    size_bytes: int

    def to_dict(self) -> dict:
        return {**asdict(self), "link_type": LINK_TYPES.get(self.encapsulation, self.encapsulation)}


def describe(path: Path) -> CaptureInfo:
    out = subprocess.run(["capinfos", "-T", "-M", "-r", "-t", "-E", "-c", str(path)],
                         capture_output=True, text=True, check=True).stdout
    _, fmt, encapsulation, packets = out.rstrip("\n").split("\t")
    lengths = subprocess.run(["tshark", "-n", "-r", str(path), "-T", "fields", "-e", "frame.len"],
                             capture_output=True, text=True, check=True).stdout.split()
    return CaptureInfo(fmt, encapsulation, int(packets), max(map(int, lengths), default=0),
                       path.stat().st_size)
