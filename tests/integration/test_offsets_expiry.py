"""Expired offsets, against Apache Kafka itself, from all four sources.

A Kafka 4.1 broker with offsets.retention.minutes=1: a classic and a consumer-protocol group
commit and leave, and Kafka expires their offsets (offset tombstones) and then the groups
(group tombstones); a third group keeps a live member, so its offsets stay. kinspect must agree
with kafka-consumer-groups (--list, --describe), the groups' committed() views and
kafka-dump-log, from the log dir, the segments, a capture of the run, and the live broker.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

from kinspect.groups.model import DELETED
from kinspect.groups.sources import read_capture, read_live, read_log_dir, read_segments
from tests.integration.test_offsets_oracle import (LiveMember, consume_and_commit, create_topics,
                                                   offsets_of, produce)
from tests.lab.kafka import KAFKA_4, LAB_FILES, KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder
from tests.unit.groups.oracles import (check_history_against_dump, committed_events,
                                       describe_offsets, dump_log_records)

pytestmark = pytest.mark.lab

TOPIC, PARTITIONS, PER_PARTITION = "expiring", 2, 6
EXPIRED = {"expired-classic": "classic", "expired-consumer": "consumer"}
KEPT = "kept-classic"
GROUPS = [*EXPIRED, KEPT]
RETENTION = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 1000}


@pytest.fixture(scope="module")
def expiry(tmp_path_factory):
    require_lab_host()
    capture = tmp_path_factory.mktemp("offsets-expiry") / "expiry.pcap"
    with KafkaBroker(KAFKA_4, config=RETENTION) as kafka:
        kafka.compile_java(LAB_FILES / "LabClients.java")
        with Recorder(capture, "lo", f"tcp port {kafka.port}"):
            create_topics(kafka.bootstrap, {TOPIC: PARTITIONS})
            produce(kafka.bootstrap, {TOPIC: PARTITIONS}, PER_PARTITION)
            kept = LiveMember(kafka.bootstrap, KEPT, "classic", [TOPIC], PARTITIONS * PER_PARTITION)
            kept.start()
            with ThreadPoolExecutor(len(EXPIRED)) as pool:  # the groups are apart: commit at once
                for done in [pool.submit(consume_and_commit, kafka.bootstrap, group, protocol, [TOPIC],
                                         PARTITIONS * PER_PARTITION) for group, protocol in EXPIRED.items()]:
                    done.result()
            kept.wait_ready()
            before = describe_offsets(kafka.consumer_groups("--describe", "--all-groups"))
            waited = _wait_for_expiry(kafka.bootstrap)
            # what each tool sees after the expiry, asked at once (each of Kafka's is a JVM to start)
            with ThreadPoolExecutor(3) as pool:
                listed = pool.submit(kafka.consumer_groups, "--list")
                described = pool.submit(kafka.consumer_groups, "--describe", "--all-groups")
                live = pool.submit(lambda: {g: read_live(kafka.bootstrap, g) for g in GROUPS})
                committed = _committed(kafka)
                listed, described, live = (set(listed.result().split()), describe_offsets(described.result()),
                                           live.result())
            kept.stop()
        kafka.stop()
        partitions = sorted({d for d in kafka.log_dir.glob("__consumer_offsets-*")
                             if any(f.stat().st_size for f in d.glob("*.log"))})
        yield SimpleNamespace(
            before=before, waited=waited, listed=listed, described=described, live=live,
            committed=committed, capture=read_capture(str(capture), ports={kafka.port}),
            log_dir={g: read_log_dir(kafka.log_dir, g, history=True) for g in GROUPS},
            segments={d.name: read_segments(sorted(d.glob("*.log")), history=True)
                      for d in partitions},
            dumps=_dumps(kafka, partitions))


def _wait_for_expiry(bootstrap: str, timeout: float = 150) -> float:
    """Until no expired-* group is listed (kinspect's own ListGroups: cheap to poll)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        listed = read_live(bootstrap).groups
        if not any(g in listed for g in EXPIRED):
            return time.monotonic() - start
        time.sleep(0.5)
    pytest.fail(f"Kafka did not expire {list(EXPIRED)} within {timeout} s")


def _dumps(kafka, partitions: list[Path]) -> dict[str, list[dict]]:
    """kafka-dump-log's records of each partition, from one run over all their segments (a JVM
    to start, not one a partition): its output split at each file's "Dumping <file>" line."""
    texts: dict[str | None, list[str]] = {}
    name = None
    for line in kafka.dump_log(*(f for d in partitions for f in sorted(d.glob("*.log"))),
                               decoder="offsets").splitlines(keepends=True):
        if line.startswith("Dumping "):
            name = Path(line.removeprefix("Dumping ").strip()).parent.name
        texts.setdefault(name, []).append(line)
    texts.pop(None, None)  # what it says before the first file
    assert sorted(texts) == sorted(d.name for d in partitions), list(texts)
    return {name: dump_log_records("".join(lines)) for name, lines in texts.items()}


def _committed(kafka) -> dict:
    partitions = [[TOPIC, p] for p in range(PARTITIONS)]
    with ThreadPoolExecutor(3) as pool:
        views = {}
        for events in pool.map(lambda g: kafka.java_clients("committed", {"group.id": g},
                                                            {"partitions": partitions}), GROUPS):
            views.update(committed_events(events))
    return views


def test_kafka_expired_two_groups_and_kept_the_one_with_a_member(expiry):
    assert {g for g, _, _ in expiry.before} == set(GROUPS)
    assert expiry.listed == {KEPT}
    assert {g for g, _, _ in expiry.described} == {KEPT}
    assert all(expiry.committed[(g, TOPIC, p)] is None for g in EXPIRED for p in range(PARTITIONS))
    assert all(expiry.committed[(KEPT, TOPIC, p)] for p in range(PARTITIONS))


def test_every_source_agrees_with_committed(expiry):
    sources = {"capture": offsets_of(expiry.capture), "live": {}, "log dir": {}, "segments": {}}
    for group in GROUPS:
        sources["live"].update(offsets_of(expiry.live[group]))
        sources["log dir"].update(offsets_of(expiry.log_dir[group]))
    for view in expiry.segments.values():
        sources["segments"].update(offsets_of(view))
    for name, found in sources.items():
        for key, seen in expiry.committed.items():
            got = found.get(key)
            assert (got.offset if got else None) == (seen["offset"] if seen else None), (name, key)


def test_expired_groups_are_gone_from_every_source(expiry):
    for group in EXPIRED:
        assert group not in expiry.live[group].groups
        assert not expiry.log_dir[group].groups[group].exists
        assert expiry.log_dir[group].groups[group].state == "Dead"
        assert expiry.capture.groups[group].offsets == {}
        deleted = {(c.topic, c.partition) for c in expiry.log_dir[group].history
                   if c.outcome == DELETED}
        assert deleted == {(TOPIC, p) for p in range(PARTITIONS)}
    kept = expiry.log_dir[KEPT].groups[KEPT]
    assert kept.exists and {tp: c.offset for tp, c in kept.offsets.items()} == {
        (TOPIC, p): row["CURRENT-OFFSET"] for (g, _, p), row in expiry.described.items()}


def test_expiry_tombstones_agree_with_kafka_dump_log(expiry):
    for partition, records in expiry.dumps.items():  # every commit of kinspect's history compared
        history = expiry.segments[partition].history
        assert check_history_against_dump(records, history) == len(history), partition
    tombstones = [r for records in expiry.dumps.values() for r in records
                  if "marker" not in r and r["payload"] is None]
    commit_tombstones = [r for r in tombstones if r["key"]["type"] in ("0", "1")]
    assert len(commit_tombstones) == len(EXPIRED) * PARTITIONS
    assert len(tombstones) > len(commit_tombstones)  # the groups themselves went too
