"""Report benchmark (not a test): kinspect report against kinspect decode --summary of the same file.

    python tests/bench/bench_report.py                          # the cached small-Produce capture, and a 1 GB-class one
    python tests/bench/bench_report.py FILE --port 9092 --repeat 3

Each tool runs with stdout to /dev/null (the report to a scratch file), interleaved and rotated
per round; per run the wall time, the CPU time (the child's and its reaped workers'), the peak
RSS of the largest process and the sampled peak PSS of the process tree (tests/bench/measure.py),
and the report's page size. The 1 GB-class capture is the cached small-Produce recording
(tools/record_small_produce_capture.py) four times over, each copy's timestamps moved past the
one before and its loopback addresses moved to a /16 of their own (so its connections are new):
4 x 276 MB, four times the exchanges over four times the span, from four "brokers". The medians, report's ratios to decode --summary and the page sizes are printed and
written to tests/bench/results/report-<capture>-<date>.json (and .md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.measure import machine_facts, run_child  # noqa: E402
from tools.record_bench_capture import CACHE  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SMALL_PRODUCE = CACHE / "bench-small-produce.pcap"
COPIES = 4


def one_gb_class(source: Path = SMALL_PRODUCE, copies: int = COPIES) -> Path:
    """``source`` ``copies`` times over, each copy after the one before in time and on addresses
    of its own (copy n: every 127.0.0.x address becomes 127.n.0.x, so its connections are new
    ones, not retransmissions of the first copy's); made once."""
    out = source.with_name(f"{source.stem}.x{copies}{source.suffix}")
    if out.is_file() and out.stat().st_mtime >= source.stat().st_mtime:
        return out
    span = _span_s(source) + 1
    with open(source, "rb") as read, open(str(out) + ".part", "wb") as write:
        header = read.read(24)
        write.write(header)
        order = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        record = struct.Struct(order + "IIII")
        for n in range(copies):
            read.seek(24)
            while True:
                head = read.read(16)
                if len(head) < 16:
                    break
                seconds, fraction, kept, length = record.unpack(head)
                data = bytearray(read.read(kept))
                if n and len(data) >= 34 and data[12:14] == b"\x08\x00":  # Ethernet, IPv4
                    for at in (26, 30):  # source and destination address
                        if data[at] == 127:
                            data[at + 1] = n
                write.write(record.pack(seconds + round(n * span), fraction, kept, length))
                write.write(data)
    Path(str(out) + ".part").rename(out)
    return out


def _span_s(capture: Path) -> float:
    out = subprocess.run(["capinfos", "-u", "-M", "-T", "-r", str(capture)], capture_output=True, text=True,
                         check=True).stdout
    return float(out.split("\t")[-1])


def argv_for(tool: str, capture: Path, port: int, page: Path) -> list[str]:
    ports = [] if port == 9092 else ["--port", str(port)]
    if tool == "report":
        return [sys.executable, "-m", "kinspect", "report", *ports, str(capture), "-o", str(page)]
    return [sys.executable, "-m", "kinspect", "decode", "--summary", *ports, str(capture)]


def measure(capture: Path, port: int, repeat: int) -> list[dict]:
    runs = []
    tools = ("decode --summary", "report")
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "report.html"
        for r in range(repeat):
            for tool in tools[r % 2:] + tools[:r % 2]:
                page.unlink(missing_ok=True)
                child = run_child(argv_for(tool, capture, port, page))
                row = {"tool": tool, "bytes": capture.stat().st_size, **dataclasses.asdict(child)}
                if tool == "report":
                    row["page_bytes"] = page.stat().st_size if page.exists() else None
                runs.append(row)
                print(json.dumps(row), flush=True)
    return runs


def summarise(runs: list[dict]) -> dict:
    out = {}
    for tool in ("decode --summary", "report"):
        mine = [r for r in runs if r["tool"] == tool]
        out[tool] = {k: statistics.median(r[k] for r in mine) for k in ("wall_s", "user_s", "sys_s", "peak_rss_mb",
                                                                         "peak_tree_pss_mb")}
    out["report"]["page_bytes"] = max(r["page_bytes"] or 0 for r in runs if r["tool"] == "report")
    decode, report = out["decode --summary"], out["report"]
    out["ratio_wall"] = round(report["wall_s"] / decode["wall_s"], 2)
    out["ratio_cpu"] = round((report["user_s"] + report["sys_s"]) / (decode["user_s"] + decode["sys_s"]), 2)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("captures", nargs="*", type=Path)
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    captures = args.captures or [SMALL_PRODUCE, one_gb_class()]
    stamp = time.strftime("%Y%m%d-%H%M", time.gmtime())
    for capture in captures:
        runs = measure(capture, args.port, args.repeat)
        summary = summarise(runs)
        result = {"capture": capture.name, "bytes": capture.stat().st_size, "machine": machine_facts(),
                  "runs": runs, "summary": summary}
        name = f"report-{capture.stem}-{stamp}"
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        d, r = summary["decode --summary"], summary["report"]
        lines = [f"# kinspect report vs decode --summary: {capture.name} ({capture.stat().st_size:,} bytes)", "",
                 "| tool | wall s | CPU s | peak RSS MB | peak tree PSS MB | page bytes |", "|---|---|---|---|---|---|",
                 f"| decode --summary | {d['wall_s']} | {d['user_s'] + d['sys_s']:.2f} | {d['peak_rss_mb']} | "
                 f"{d['peak_tree_pss_mb']} | - |",
                 f"| report | {r['wall_s']} | {r['user_s'] + r['sys_s']:.2f} | {r['peak_rss_mb']} | "
                 f"{r['peak_tree_pss_mb']} | {r['page_bytes']:,} |", "",
                 f"report / decode --summary: {summary['ratio_wall']}x wall, {summary['ratio_cpu']}x CPU "
                 f"(medians of {args.repeat})"]
        (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
