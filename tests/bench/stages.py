"""The decode pipeline cut after each layer, to measure what each layer adds (not a test).

    python -m tests.bench.stages STAGE CAPTURE      # prints {"stage", "cpu_s", "rss"...} as JSON

Each stage does everything the one before it did, plus one layer: reading packets, link
decode, TCP reassembly, Kafka frames/headers/pairing, bodies (record sets kept raw), records
without checks, records with checks (the default), JSON encoding, writing to /dev/null. Records
are decoded as decode --json decodes them: regular batches packed, their JSON text written by
the json stage.
Run one stage per process, so each starts cold and its peak memory is its own.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

from kinspect.capture.link import decode_tcp
from kinspect.capture.source import open_capture
from kinspect.capture.tcp import TcpReassembler
from kinspect.limits import Budget
from kinspect.decode.pipeline import DecodeRun
from kinspect.render import jsonl
from kinspect.wire import messages
from kinspect.wire.exchange import RAW, complete

STAGES = ("read", "link", "tcp", "frames", "bodies", "records", "checks", "json", "write")


def _packets(path: str, link: bool, tcp: bool) -> int:
    reassembler = TcpReassembler()
    n = 0
    with open_capture(path) as capture:
        for ts, linktype, data, _number in capture.packets():
            n += 1
            if not link:
                continue
            segment = decode_tcp(linktype, data)
            if segment is None or not tcp:
                continue
            src, dst, sport, dport, seq, flags, payload, *ack = segment  # ack: newer decode_tcp only
            for _event in reassembler.segment(ts, src, sport, dst, dport, seq, flags, payload, *ack):
                pass
    return n


def _decode(path: str, stage: str) -> int:
    if stage == "bodies":
        messages.decode_body = functools.partial(messages.decode_body, raw_records=True)
    elif stage == "records":
        messages.decode_body = functools.partial(messages.decode_body, record_checks=False)
    run = DecodeRun(path, decode_bodies=stage != "frames")
    records = _finished(run) if stage != "frames" else run.raw_records()
    n = 0
    if stage in ("json", "write"):
        # as the CLI does: UTF-8 bytes to stdout's buffer where jsonl has dumpb, else text
        encode = getattr(jsonl, "dumpb", None)
        newline = b"\n" if encode else "\n"
        encode = encode or jsonl.dumps
        out = open("/dev/null", "wb" if newline == b"\n" else "w") if stage == "write" else None
        for record in records:
            line = encode(record)
            if out is not None:
                out.write(line + newline)
            n += 1
        if out is not None:
            out.close()
    else:
        for _record in records:
            n += 1
    return n


def _finished(run: DecodeRun):
    """The exchanges with their bodies decoded, as decode --json has them: regular batches'
    records packed (records/packed.py), written to JSON from their bytes by the json stage."""
    budget = Budget(run.limits, pack_records=True)
    for record in run.raw_records():
        if RAW in record:
            budget.next_unit()
            complete(record, run.topics, budget)
        yield record


def run_stage(stage: str, path: str) -> dict:
    started = time.process_time()
    if stage in ("read", "link", "tcp"):
        count = _packets(path, link=stage != "read", tcp=stage == "tcp")
    else:
        count = _decode(path, stage)
    cpu = time.process_time() - started
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    kb = {k: int(status[k].split()[0]) for k in ("VmHWM", "RssAnon", "RssFile")}
    return {"stage": stage, "items": count, "cpu_s": round(cpu, 3),
            "peak_rss_mb": round(kb["VmHWM"] / 1024, 1), "rss_anon_mb_at_end": round(kb["RssAnon"] / 1024, 1),
            "rss_file_mb_at_end": round(kb["RssFile"] / 1024, 1)}


if __name__ == "__main__":
    stage_name, capture_file = sys.argv[1:3]
    if stage_name not in STAGES:
        sys.exit(f"stage must be one of {', '.join(STAGES)}")
    print(json.dumps(run_stage(stage_name, capture_file)))
