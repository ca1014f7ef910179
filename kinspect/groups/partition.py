"""Which __consumer_offsets partition holds a group: Kafka's partitionFor, with Java's arithmetic.

    partition_for("my-group")          # abs(Java "my-group".hashCode()) % 50

Java hashes a String over its UTF-16 code units (a character outside the Basic Multilingual
Plane counts as two surrogates) with int32 wraparound; Kafka's Utils.abs maps
Integer.MIN_VALUE to 0, where Math.abs would leave it negative.
"""

from __future__ import annotations

import struct

DEFAULT_PARTITIONS = 50  # offsets.topic.num.partitions
INT32_MIN = -(1 << 31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode(): s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    raw = text.encode("utf-16-be", "surrogatepass")
    units = struct.unpack(f">{len(raw) // 2}H", raw)
    h = 0
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """org.apache.kafka.common.utils.Utils.abs: |n|, and 0 for Integer.MIN_VALUE."""
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    if partitions < 1:
        raise ValueError(f"the offsets topic has at least one partition, not {partitions}")
    return kafka_abs(java_string_hash(group)) % partitions
