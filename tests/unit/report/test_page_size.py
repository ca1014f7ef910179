"""The page's size is bounded whatever the input: every chart and table is capped. A synthetic
worst case fills every cap (more APIs, brokers, error codes, clients, topics, findings, group
partitions and log-dir partitions than are shown; every time bucket used; names at the protocol's
longest) and its page must stay under the bound the README states for any capture, 1 GB or more."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from kinspect.report.gather import Gathered
from kinspect.report.logdir import FINDINGS, POINTS, LogDir, Partition
from kinspect.report.model import build
from kinspect.report.page import render
from kinspect.report.timeline import MAX_BUCKETS

BOUND = 8 * 2**20  # bytes: the page-size bound the README states
LONG = "x" * 32_767  # the longest client id or group id the protocol carries


def _exchange(i: int, t: float) -> dict:
    api = i % 40
    return {"type": "exchange", "conn": f"10.0.{i % 250}.1:{1000 + i % 5000}-10.1.0.{api}:9092",
            "api_key": 1000 + api, "api_name": f"Api{api}-{LONG[:200]}", "api_version": 0,
            "correlation_id": i, "client_id": f"{i % 1500}{LONG}", "request_time": t,
            "response_time": t + 0.01, "latency_ms": 10.0 + i % 977, "request_size": 100, "response_size": 1000,
            "request": {}, "response": {}, "error_codes": [f"ERROR_{i % 40}"],
            "_topics": [f"topic-{i % 3000}-{LONG[:240]}"]}


def _worst_case() -> Gathered:
    gathered = Gathered()
    day = 86_400.0
    i = 0
    for bucket in range(MAX_BUCKETS * 2):
        for _ in range(40):
            gathered.add(_exchange(i, 1_700_000_000.0 + bucket * 10 * day / (MAX_BUCKETS * 2)))
            i += 1
    for n in range(1600):  # clients past the table's rows
        gathered.add(_exchange(i + n * 40, 1_700_000_000.0))
    rounds = [{"generation": r, "started": 1.7e9 + r, "assigned": 1.7e9 + r + 1, "pause_ms": 1000.0,
               "members": 3, "joined": 1, "left": 1} for r in range(256)]
    gathered.findings += [{"type": "finding", "check": "rebalance", "severity": "warning", "summary": LONG,
                           "group": f"{g}{LONG}", "rebalances": 256, "reasons": [{"reason": LONG, "count": 1}] * 20,
                           "rounds": rounds,
                           "evidence": [{"conn": LONG, "correlation_id": 1, "time": 1.7e9}] * 5}
                          for g in range(400)]
    for n in range(1500):  # schemas past the table's rows, subjects that escape to four times their length
        gathered.summary.schemas.add({"api_name": f"Api{n % 40}-{LONG[:200]}", "_schemas": [
            (("value", (n, None, f"{n}{'<' * 32_000}", "protobuf"), "failed"), 2 ** 40)]})
    gathered.finish()
    series = [{"time": 1.7e9 + s, "lag": 2 ** 62 - s} for s in range(256)]  # the longest doctor keeps
    gathered.lag_rows = [{"group": f"{g}{LONG}", "topic": LONG[:249], "partition": g, "committed_offset": 1,
                          "log_end_offset": 2 ** 62, "lag": 2 ** 62 - g, "lag_seconds": 1e9, "isolation": "read_committed",
                          "series": series} for g in range(1500)]
    storage = LogDir(Path("/var/lib/kafka/" + LONG[:200]))
    points = [(2 ** 50 + k * 1000, 1_700_000_000_000 + k) for k in range(POINTS)]  # a full partition's
    for n in range(1500):
        part = Partition(LONG[:249], n)
        part.log_bytes, part.batches, part.records = 2 ** 40 + n, 2 ** 30, 2 ** 40
        part.points = points
        storage.partitions.append(part)
    storage.sizes = {f"codec{c}": Counter({1 << b: 10 ** 9 for b in range(6, 31)}) for c in range(6)}
    storage.codecs = Counter({f"codec{c}": 10 ** 9 for c in range(6)})
    storage.codec_bytes = Counter({f"codec{c}": 10 ** 15 for c in range(6)})
    storage.findings = [{"file": f"/var/lib/kafka/{LONG[:200]}/{n}.log", "check": "crc", "severity": "error",
                         "what": LONG, "path": LONG, "position": 2 ** 40, "base_offset": 2 ** 50}
                        for n in range(FINDINGS)]
    storage.finding_counts = Counter({"error": 10 ** 6})
    gathered.storage = storage
    return gathered


def test_the_worst_case_page_stays_under_the_bound():
    gathered = _worst_case()
    model = build(gathered, ["capture.pcap"], "/var/lib/kafka")
    page = render(model, LONG).encode()
    print(f"worst-case page: {len(page):,} bytes")
    charts = {c["id"]: c for s in model["sections"] for c in s["charts"]}
    assert len(charts["requests-by-api"]["series"]) == 16  # the caps were reached: this is the worst case
    assert all(len(s["points"]) == len(gathered.timeline.times()) for s in charts["requests-by-api"]["series"])
    assert len(gathered.timeline.times()) > MAX_BUCKETS // 2
    assert len(charts["lag"]["series"]) == 16 and len(charts["rebalance"]["series"]) == 16
    assert len(charts["timestamps"]["series"]) == 16
    tables = {t["id"]: t for s in model["sections"] for t in s["tables"]}
    assert len(tables["schema-table"]["rows"]) == 300
    assert len(page) <= BOUND
