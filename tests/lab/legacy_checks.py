"""`kinspect decode --json` against the Apache Kafka captures' manifests (tests/lab/legacy_recipes.py):
the message sets themselves, beyond tests/lab/checks.py's values, counts and commits.

Each check returns human-readable mismatches; empty means it holds. Record sets are where the
JSON Lines contract puts them: Produce request topic_data[].partition_data[].records, Fetch
response responses[].partitions[].records; legacy wrappers are "batches" whose "records" are the
decompressed inner messages.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterator

from tests.lab.checks import FETCH, PRODUCE, Decoded, value_text

BAD_SEVERITIES = ("error", "warning")


def record_sets(decoded: Decoded) -> Iterator[tuple[str, dict, str, int, list]]:
    """(direction, exchange, topic, partition, batches) for every record set in the capture."""
    for e in decoded.exchanges:
        if e.get("api_key") == PRODUCE and e.get("request"):
            for topic in e["request"].get("topic_data") or ():
                for partition in topic.get("partition_data") or ():
                    yield ("produce", e, topic.get("name"), partition.get("index"),
                           partition.get("records") or [])
        elif e.get("api_key") == FETCH and e.get("response"):
            for topic in e["response"].get("responses") or ():
                for partition in topic.get("partitions") or ():
                    yield ("fetch", e, topic.get("topic"), partition.get("partition_index"),
                           partition.get("records") or [])


def _where(direction: str, e: dict, topic: str, partition: int) -> str:
    return (f"{'Produce request' if direction == 'produce' else 'Fetch response'} v{e['api_version']} "
            f"corr {e['correlation_id']} {topic}[{partition}]")


def _clients_by_topic(manifest: dict) -> dict[str, dict]:
    return {c["expect"]["topic"]: c for c in manifest["clients"]}


def check_message_sets(decoded: Decoded, manifest: dict) -> list[str]:
    """Per client topic and direction, the (magic, codec) pairs of the batches are exactly the
    expected magic with each codec the client produced: every codec is there, in the right format."""
    seen: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for direction, _, topic, _, batches in record_sets(decoded):
        for batch in batches:
            seen[(topic, direction)][(batch.get("magic"), batch.get("compression"))] += 1
    bad = []
    for topic, client in _clients_by_topic(manifest).items():
        codecs = {p["codec"] for p in client["produced"]}
        for direction in ("produce", "fetch"):
            magic = client["expect"][f"{direction}_magic"]
            expected = {(magic, codec) for codec in codecs}
            found = set(seen[(topic, direction)])
            if found != expected:
                bad.append(f"{topic} {direction}: (magic, compression) {sorted(found, key=str)}, "
                           f"expected {sorted(expected)}")
    return bad


def check_crcs(decoded: Decoded) -> list[str]:
    """Every batch or wrapper, and every inner message that has a CRC of its own, is valid."""
    bad = []
    checked = 0
    for direction, e, topic, partition, batches in record_sets(decoded):
        for i, batch in enumerate(batches):
            checked += 1
            if batch.get("crc_valid") is not True:
                bad.append(f"{_where(direction, e, topic, partition)} batch[{i}]: crc_valid "
                           f"{batch.get('crc_valid')!r}")
            for j, record in enumerate(batch.get("records") or ()):
                if "crc_valid" in record and record["crc_valid"] is not True:
                    bad.append(f"{_where(direction, e, topic, partition)} batch[{i}] records[{j}]: "
                               f"inner crc_valid {record['crc_valid']!r}")
    return bad if checked else ["no record sets in the capture"]


def check_batches_expanded(decoded: Decoded) -> list[str]:
    """Every batch shows all its records, each with a value, at the offsets its header implies:
    v2 batches records_count records from base_offset; compressed legacy wrappers their inner
    messages, of the wrapper's magic, at consecutive offsets, in Fetch responses ending at the
    wrapper's own (Kafka's rule for wrappers; kafka-python's Produce requests number every wrapper
    0); an uncompressed legacy message one record at its own offset."""
    bad = []
    compressed = 0
    for direction, e, topic, partition, batches in record_sets(decoded):
        for i, batch in enumerate(batches):
            where = f"{_where(direction, e, topic, partition)} batch[{i}] ({batch.get('compression')})"
            records = batch.get("records") or []
            compressed += batch.get("compression") != "none"
            if batch.get("magic") == 2:
                first, count = batch["base_offset"], batch["records_count"]
            elif batch.get("compression") == "none":
                first, count = batch["offset"], 1
            elif direction == "produce":  # kafka-python numbers a wrapper 0, not as a broker does
                first, count = (records[0].get("offset") if records else 0), len(records)
            else:
                first, count = batch["offset"] - len(records) + 1, len(records)
                magics = {r.get("magic") for r in records}
                if magics != {batch["magic"]}:
                    bad.append(f"{where}: inner magic {sorted(magics, key=str)} in a magic "
                               f"{batch['magic']} wrapper")
            if not records:
                bad.append(f"{where}: no records")
            if any(r.get("value") is None for r in records):
                bad.append(f"{where}: a record without a value")
            offsets = [r.get("offset") for r in records]
            if offsets != list(range(first, first + count)):
                bad.append(f"{where}: record offsets {offsets}, expected {count} from {first}")
    return bad if compressed else ["no compressed batches in the capture"]


def check_fetched_offsets(decoded: Decoded, manifest: dict) -> list[str]:
    """Every value a consumer received is in a Fetch response at the partition and offset the
    consumer reported: offsets inside wrappers (absolute for magic 0, relative for 1) resolved."""
    fetched = defaultdict(set)
    for direction, _, topic, partition, batches in record_sets(decoded):
        if direction != "fetch":
            continue
        for batch in batches:
            for record in batch.get("records") or ():
                fetched[value_text(record.get("value"))].add((topic, partition, record.get("offset")))
    bad = []
    for client in manifest["clients"]:
        for c in client["consumed"]:
            place = (c["topic"], c["partition"], c["offset"])
            if place not in fetched.get(c["value"], ()):
                bad.append(f"{client['client']}: consumed {c['value'][:50]!r} at {place}, "
                           f"decode shows {sorted(fetched.get(c['value'], ()), key=str)}")
    return bad


def _log_append_time_topics(manifest: dict) -> set[str]:
    return {topic for topic, c in _clients_by_topic(manifest).items()
            if c["expect"]["topic_config"].get("message.timestamp.type") == "LogAppendTime"}


def check_fetched_as_produced(decoded: Decoded, manifest: dict) -> list[str]:
    """A value fetched back has the key it was produced with, and, where both sides have
    timestamps (magic 1 and 2) and the topic keeps CreateTime, the same timestamp; magic 0
    has none."""
    log_append_time = _log_append_time_topics(manifest)
    produced: dict[str, tuple] = {}
    fetched: list[tuple] = []
    for direction, e, topic, partition, batches in record_sets(decoded):
        for batch in batches:
            for record in batch.get("records") or ():
                seen = (batch.get("magic"), value_text(record.get("key")), record.get("timestamp"))
                if direction == "produce":
                    produced[value_text(record.get("value"))] = seen
                else:
                    fetched.append((value_text(record.get("value")), seen,
                                    _where(direction, e, topic, partition), topic))
    bad = []
    for value, (magic, key, timestamp), where, topic in fetched:
        if value not in produced:
            continue  # check_produced_values reports it
        p_magic, p_key, p_timestamp = produced[value]
        if key != p_key:
            bad.append(f"{where}: {value[:50]!r} has key {key!r}, produced with {p_key!r}")
        if magic == 0 and timestamp is not None:
            bad.append(f"{where}: {value[:50]!r} is magic 0 but has timestamp {timestamp}")
        if magic and p_magic and topic not in log_append_time and timestamp != p_timestamp:
            bad.append(f"{where}: {value[:50]!r} has timestamp {timestamp}, produced with {p_timestamp}")
    return bad if fetched else ["no records in Fetch responses"]


def check_log_append_time(decoded: Decoded, manifest: dict) -> list[str]:
    """On a LogAppendTime topic every fetched batch says so, and every record, inner messages
    of wrappers included, has the time the broker gave in the Produce response that appended it
    (log_append_time_ms, per partition, for the offsets from base_offset on)."""
    topics = _log_append_time_topics(manifest)
    if not topics:
        return ["no client writes to a LogAppendTime topic"]
    appended: dict[tuple[str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for e in decoded.exchanges:
        if e.get("api_key") != PRODUCE or not e.get("request") or not e.get("response"):
            continue
        counts = {(t.get("name"), p.get("index")):
                  sum(len(batch.get("records") or ()) for batch in p.get("records") or ())
                  for t in e["request"].get("topic_data") or ()
                  for p in t.get("partition_data") or ()}
        for t in e["response"].get("responses") or ():
            for p in t.get("partition_responses") or ():
                key = (t.get("name"), p.get("index"))
                if key[0] in topics and p.get("error_code") == 0:
                    appended[key].append((p["base_offset"], p["base_offset"] + counts.get(key, 0),
                                          p["log_append_time_ms"]))
    bad = []
    fetched = 0
    for direction, e, topic, partition, batches in record_sets(decoded):
        if direction != "fetch" or topic not in topics:
            continue
        for i, batch in enumerate(batches):
            where = f"{_where(direction, e, topic, partition)} batch[{i}]"
            if batch.get("timestamp_type") != "LogAppendTime":
                bad.append(f"{where}: timestamp_type {batch.get('timestamp_type')!r}")
            for record in batch.get("records") or ():
                fetched += 1
                times = [ms for first, end, ms in appended[(topic, partition)]
                         if first <= record.get("offset") < end]
                if times != [record.get("timestamp")]:
                    bad.append(f"{where}: offset {record.get('offset')} has timestamp "
                               f"{record.get('timestamp')}, the Produce responses say {times}")
    return bad if fetched else [f"no records fetched from {sorted(topics)}"]


def check_no_bad_problems(decoded: Decoded) -> list[str]:
    """No error or warning anywhere: exchanges, notices, orphan responses."""
    bad = []
    for line in decoded.lines:
        problems = line.get("problems") or []
        if line.get("type") == "notice" and line.get("severity") in BAD_SEVERITIES:
            problems = [line]
        for p in problems:
            if p.get("severity") in BAD_SEVERITIES:
                where = line.get("type")
                if where == "exchange":
                    where = (f"{line.get('api_name')} v{line.get('api_version')} "
                             f"corr {line.get('correlation_id')}")
                bad.append(f"{where}: {p.get('severity')} at {p.get('path')} byte {p.get('offset')}: "
                           f"{p.get('what')}")
    return bad


def lz4_wrappers(decoded: Decoded) -> Counter:
    """Legacy lz4 wrapper messages per magic, both directions."""
    return Counter(batch["magic"] for _, _, _, _, batches in record_sets(decoded) for batch in batches
                   if batch.get("magic") in (0, 1) and batch.get("compression") == "lz4")


ALL_CHECKS = {
    "message_sets": check_message_sets,
    "crcs": lambda decoded, manifest: check_crcs(decoded),
    "batches_expanded": lambda decoded, manifest: check_batches_expanded(decoded),
    "fetched_offsets": check_fetched_offsets,
    "fetched_as_produced": check_fetched_as_produced,
    "no_bad_problems": lambda decoded, manifest: check_no_bad_problems(decoded),
}
