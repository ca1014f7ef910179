"""What every lab client script shares: options, unique values, the request tally, the manifest.

A client script produces values, consumes them back in a committing consumer group, and prints
one JSON manifest on stdout saying exactly what it did: every value it produced, the requests
its library logged as sent (and the responses as received) per (api_key, api_version), and the
offsets the group committed as the library reports them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field

from tests.lab.api_names import API_NAMES, api_key

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_args(client: str, argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=f"{client} lab client: produce, consume, commit")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", help="default: lab-<label>")
    p.add_argument("--group", help="default: lab-<label>-group")
    p.add_argument("--codecs", default="none", help="comma-separated: " + ",".join(CODECS))
    p.add_argument("--count", type=int, default=5, help="values per codec")
    p.add_argument("--value-size", type=int, default=0, help="pad each value to this many bytes")
    p.add_argument("--api-version", default=None, help="pin the protocol level, e.g. 0.10.1")
    p.add_argument("--consumer-api-version", default=None,
                   help="pin only the consumer's protocol level (default: --api-version)")
    p.add_argument("--no-consume", action="store_true", help="produce only")
    p.add_argument("--label", default=client, help="prefix of every value and client id")
    args = p.parse_args(argv)
    args.topic = args.topic or f"lab-{args.label}"
    args.group = args.group or f"lab-{args.label}-group"
    args.consumer_api_version = args.consumer_api_version or args.api_version
    args.codecs = args.codecs.split(",")
    unknown = set(args.codecs) - set(CODECS)
    if unknown:
        p.error(f"unknown codecs {sorted(unknown)}")
    return args


def make_value(label: str, codec: str, i: int, size: int) -> str:
    """Unique per (label, codec, i); padded with a filler that compresses, as real data does."""
    base = f"{label}-{codec}-{i}"
    return base if len(base) >= size else base + "-" + "x" * (size - len(base) - 1)


def make_headers(i: int) -> list[tuple[str, bytes]]:
    """Every third record carries headers, so batches mix records with and without them."""
    return [("lab-seq", str(i).encode()), ("lab-kind", b"fixture")] if i % 3 == 0 else []


@dataclass
class RequestTally:
    """Requests sent and responses received, per (api_key, api_version), from debug logs."""

    sent: Counter = field(default_factory=Counter)
    received: Counter = field(default_factory=Counter)

    def count_sent(self, name: str, version: int | str) -> None:
        self.sent[(api_key(name), int(version))] += 1

    def count_received(self, name: str, version: int | str) -> None:
        self.received[(api_key(name), int(version))] += 1

    def scan(self, text: str, sent: re.Pattern, received: re.Pattern) -> None:
        """Count every match of the two patterns; groups are (name, version)."""
        for m in sent.finditer(text):
            self.count_sent(*m.groups())
        for m in received.finditer(text):
            self.count_received(*m.groups())

    def to_list(self) -> list[dict]:
        keys = sorted(set(self.sent) | set(self.received))
        return [{"api_key": k, "api_name": API_NAMES[k], "api_version": v,
                 "sent": self.sent[(k, v)], "received": self.received[(k, v)]} for k, v in keys]


@dataclass
class Manifest:
    client: str
    versions: dict
    bootstrap: str
    topic: str
    group: str | None
    api_version: str | None
    consumer_api_version: str | None = None
    consumer_error: str | None = None
    produced: list[dict] = field(default_factory=list)
    consumed: list[dict] = field(default_factory=list)
    committed: list[dict] = field(default_factory=list)
    tally: RequestTally = field(default_factory=RequestTally)
    notes: list[str] = field(default_factory=list)

    def add_produced(self, *, value: str, key: str | None, headers, codec: str,
                     partition: int | None, offset: int | None, error: str | None) -> None:
        self.produced.append({
            "topic": self.topic, "partition": partition, "offset": offset, "codec": codec,
            "key": key, "value": value,
            "headers": [[k, v.decode() if isinstance(v, bytes) else v] for k, v in headers or []],
            "delivered": error is None, "error": error})

    def add_consumed(self, *, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        self.consumed.append({"topic": topic, "partition": partition, "offset": offset,
                              "value": None if value is None else value.decode("utf-8", "replace")})

    def add_committed(self, *, topic: str, partition: int, offset: int) -> None:
        self.committed.append({"group": self.group, "topic": topic, "partition": partition,
                               "offset": offset})

    def to_dict(self) -> dict:
        return {"client": self.client, "versions": self.versions, "bootstrap": self.bootstrap,
                "topic": self.topic, "group": self.group, "api_version": self.api_version,
                "consumer_api_version": self.consumer_api_version,
                "consumer_error": self.consumer_error,
                "requests": self.tally.to_list(), "produced": self.produced,
                "consumed": self.consumed,
                "committed": sorted(self.committed, key=lambda c: (c["topic"], c["partition"])),
                "notes": self.notes}


def emit(manifest: Manifest) -> None:
    json.dump(manifest.to_dict(), sys.stdout, indent=1)
    sys.stdout.write("\n")
    sys.stdout.flush()


def parse_api_version(text: str | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in text.split(".")) if text else None
