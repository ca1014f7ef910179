"""Shared material for the records tests: Kafka-written fixtures and real captures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REALDATA
from tests.unit.records.fetch_skeleton import fetch_record_sets, load_kafkajs

FIXTURES = Path(__file__).with_name("fixtures")
KAFKA_RUST = REALDATA / "kafka-rust"
KAFKAJS = REALDATA / "kafkajs" / "src" / "protocol"
KAFKAJS_FETCH = KAFKAJS / "requests" / "fetch" / "fixtures"


def java_manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


def java_fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.bin").read_bytes()


def kafkajs_fetch(name: str) -> list[tuple[str, int, int, bytes]]:
    version = int(name.split("_")[0][1:])
    return fetch_record_sets(load_kafkajs(KAFKAJS_FETCH / f"{name}.json"), version,
                             correlation_id=False)


def kafka_rust_fetch(name: str) -> list[tuple[str, int, int, bytes]]:
    return fetch_record_sets((KAFKA_RUST / name).read_bytes(), 0)


def values_of(batches: list[dict]) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record, in order."""
    return [(r["offset"], r["timestamp"], r["key"], r["value"],
             [(h["key"], h["value"]) for h in r["headers"]])
            for batch in batches for r in batch["records"]]


def java_values(entry: dict, magic0_timestamp=None) -> list[tuple]:
    def raw(text):
        return None if text is None else bytes.fromhex(text)
    return [(r["offset"], magic0_timestamp if batch["magic"] == 0 else r["timestamp"],
             raw(r["key"]), raw(r["value"]), [(k, raw(v)) for k, v in r["headers"]])
            for batch in entry["batches"] for r in batch["records"]]


@pytest.fixture(scope="session")
def manifest() -> dict:
    return java_manifest()
