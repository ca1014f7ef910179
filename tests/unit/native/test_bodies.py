"""native/_bodies.c's error_codes against its twin, wire/exchange.py's error_codes_py: the same
codes in the same order, on every body of every committed capture, on random trees, and on the
edges (bools, zeros, the "records" key, non-str keys, types that are not exactly dict or list)."""

from __future__ import annotations

import random

import pytest

from kinspect import native
from kinspect.decode.pipeline import DecodeRun
from kinspect.wire.exchange import error_codes_py
from tests.conftest import PCAPS, REALDATA
from tests.unit.native import needs_c

# CI builds the accelerators (test_v2records.py's test_the_accelerators_are_built fails without)
error_codes = native.bodies.error_codes if native.bodies is not None else None


def both(body) -> list:
    python, c = [], []
    error_codes_py(body, python)
    error_codes(body, c)
    assert c == python, body
    return c


class Dict(dict):
    pass


class List(list):
    pass


@needs_c
def test_the_edges():
    assert both({"error_code": 3, "x_error_code": -1, "error_codes": 5, "code": 7}) == [3, -1]
    assert both({"error_code": 0, "top_error_code": True, "e_error_code": 2.0}) == []
    assert both({"records": [{"error_code": 1}], "r": {"records": {"error_code": 2}}}) == [2]
    assert both([[{"error_code": 4}], 5, "error_code", [[{"a": {"error_code": 6}}]]]) == [4, 6]
    assert both({7: 9, b"error_code": 1, ("error_code",): 2, "ok_error_code": 8}) == [8]
    assert both({1: [{"error_code": 10}]}) == [10]  # a non-str key's list is walked
    assert both({"a": Dict(error_code=1), "b": List([{"error_code": 2}]), "c": {"error_code": 3}}) == [3]
    assert both(Dict(error_code=1)) == [] and both(List([{"error_code": 1}])) == []
    assert both({"error_code": 2**70, "n_error_code": -(2**70)}) == [2**70, -(2**70)]
    assert both(None) == [] and both(5) == [] and both("error_code") == []


@needs_c
def test_deep_trees_and_the_recursion_bound():
    body: dict = {"error_code": 1}
    for depth in range(200):
        body = {"error_code": depth + 2, "child": [body]}
    assert len(both(body)) == 201
    for _ in range(10_000):
        body = {"child": body}
    with pytest.raises(RecursionError):
        error_codes(body, [])


@needs_c
def test_random_trees():
    rng = random.Random(20261124)
    keys = ["error_code", "top_error_code", "records", "name", "partitions", "x", 3]

    def tree(depth):
        if depth > 4 or rng.random() < 0.3:
            return rng.choice([0, 1, -5, 7, True, False, None, "s", b"b", 2.5, 0])
        if rng.random() < 0.5:
            return [tree(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(keys): tree(depth + 1) for _ in range(rng.randrange(5))}

    found = 0
    for _ in range(3000):
        found += len(both(tree(0)))
    assert found > 100  # the trees did hold codes


def _captures():
    paths = sorted(PCAPS.glob("*.pcap*"))
    if REALDATA.is_dir():
        paths += sorted(p for p in REALDATA.rglob("*") if p.suffix in (".pcap", ".pcapng"))
    return paths


@needs_c
def test_every_body_of_every_committed_capture():
    bodies = errors = 0
    for path in _captures():
        try:
            records = list(DecodeRun(str(path)).records())
        except Exception:  # not a capture kinspect reads: other tests say so
            continue
        for record in records:
            for side in ("request", "response"):
                body = record.get(side)
                if body is not None:
                    bodies += 1
                    errors += bool(both(body))
    assert bodies > 1000 and errors > 10, (bodies, errors)
