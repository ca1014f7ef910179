"""decode --summary's statistics (issue 14), checked against a plain computation over decode
--json's exchanges: per API the count, versions, answered, unanswered (a request that expects a
response and got none), nearest-rank latency p50/p99, max and bytes; errors by API, code and
topic. Over every committed capture and tests/data/thirdparty's, each run on its own and all at
once (one summary over several files).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter, defaultdict

import pytest

from tests.conftest import PCAPS, REALDATA, REPO

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    sorted(p for p in REALDATA.rglob("*") if p.suffix in (".pcap", ".pcapng"))


def _lines(*args) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "kinspect", "decode", *args], cwd=REPO, capture_output=True,
                         check=False).stdout.decode()
    return [json.loads(line) for line in out.splitlines()]


def _nearest_rank(values: list[float], q: float):
    """The smallest value with at least q% of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    for i, value in enumerate(ordered, 1):
        if i * 100 >= q * len(ordered):
            return value


def plain_summary(exchanges: list[dict]) -> tuple[dict, Counter]:
    by_api = defaultdict(list)
    for e in exchanges:
        by_api[e["api_name"]].append(e)
    apis = {}
    for api, group in by_api.items():
        latencies = [e["latency_ms"] for e in group if e["response"] is not None]
        apis[api] = {
            "api_name": api, "versions": sorted({e["api_version"] for e in group}), "count": len(group),
            "answered": len(latencies),
            "unanswered": sum(1 for e in group if e["response"] is None and e.get("response_expected", True)),
            "latency_p50_ms": _nearest_rank(latencies, 50), "latency_p99_ms": _nearest_rank(latencies, 99),
            "latency_max_ms": max(latencies, default=None),
            "bytes": sum(e["request_size"] + (e["response_size"] or 0) for e in group),
        }
    errors = Counter()
    for e in exchanges:
        names = set()
        for body in (e["request"], e["response"]):
            for key in ("topics", "topic_data", "responses", "results"):
                for item in (body or {}).get(key) or ():
                    if isinstance(item, dict):
                        name = next((item[k] for k in ("name", "topic", "topic_name") if isinstance(item.get(k), str)),
                                    None)
                        if name is not None:
                            names.add(name)
        for code in e["error_codes"]:
            for topic in sorted(names) or ["-"]:
                errors[(e["api_name"], code, topic)] += 1
    return apis, errors


def _decode_summary(paths) -> tuple[dict, Counter]:
    lines = _lines("--summary", "--json", *map(str, paths))
    apis = {r["api_name"]: {k: v for k, v in r.items() if k != "type"} for r in lines if r["type"] == "summary"}
    errors = Counter({(r["api_name"], r["error"], r["topic"]): r["count"]
                      for r in lines if r["type"] == "summary_error"})
    return apis, errors


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_decode_summary_equals_a_plain_computation_over_decode_json(capture):
    exchanges = [r for r in _lines("--json", str(capture)) if r["type"] == "exchange"]
    assert _decode_summary([capture]) == plain_summary(exchanges)


def test_decode_summary_of_several_captures_at_once():
    exchanges = [r for c in CAPTURES for r in _lines("--json", str(c)) if r["type"] == "exchange"]
    apis, errors = _decode_summary(CAPTURES)
    assert (apis, errors) == plain_summary(exchanges)
    assert errors and any(row["unanswered"] for row in apis.values())  # both paths are exercised
    assert sum(row["count"] for row in apis.values()) == len(exchanges) > 500
