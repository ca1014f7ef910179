"""kinspect offsets against Apache Kafka itself, from all four sources.

One Kafka 4.1 broker (the lab's jars), a capture of everything said to it, and groups of every
kind: classic and KIP-848 consumer-protocol groups (Java clients and librdkafka), transactional
offset commits that commit and that abort, deleted groups, deleted offsets, and groups with
live members. While the members are there, and again after they leave, kinspect must agree
with kafka-consumer-groups --describe (offsets, log end offsets, lag, members, state), with each
group's own committed() view, and, record by record, with kafka-dump-log --offsets-decoder;
from the log dir (read while the broker runs and after it stopped), the segment files, the
capture, and the live broker (--bootstrap).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from kinspect.groups.exchanges import CaptureReplay
from kinspect.groups.model import ABORTED, COMMITTED, DELETED
from kinspect.groups.sources import read_capture, read_live, read_log_dir, read_segments
from kinspect.decode.pipeline import DecodeRun
from tests.lab.kafka import KAFKA_4, LAB_FILES, KafkaBroker
from tests.lab.pytest_fixtures import require_lab_host
from tests.lab.recorder import Recorder
from tests.unit.groups.oracles import (check_history_against_dump, committed_events,
                                       describe_blocks, describe_offsets, dump_log_records)

pytestmark = pytest.mark.lab
import confluent_kafka  # noqa: E402
import confluent_kafka.admin as kafka_admin  # noqa: E402

TOPICS = {"orders": 3, "payments": 2, "txn-out": 1}
PER_PARTITION = 10
CLASSIC_APP, MODERN_APP, TXN_APP = "classic-app", "modern-app", "txn-app"
GONE_CLASSIC, GONE_MODERN = "gone-classic", "gone-modern"
LIVE_CLASSIC, LIVE_MODERN = "live-classic", "live-modern"
GROUPS = [CLASSIC_APP, MODERN_APP, TXN_APP, GONE_CLASSIC, GONE_MODERN, LIVE_CLASSIC, LIVE_MODERN]
ALL_PARTITIONS = [[t, p] for t, n in TOPICS.items() for p in range(n)]


# -- real clients ---------------------------------------------------------------------------

def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    admin = kafka_admin.AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([kafka_admin.NewTopic(t, n, 1) for t, n in topics.items()])
    for future in futures.values():
        future.result(60)


def produce(bootstrap: str, topics: dict[str, int], per_partition: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for topic, partitions in topics.items():
        for partition in range(partitions):
            for n in range(per_partition):
                producer.produce(topic, f"{topic} {partition} #{n}".encode(), f"k{n}".encode(),
                                 partition=partition)
    assert producer.flush(60) == 0


def consumer_config(bootstrap: str, group: str, protocol: str) -> dict:
    config = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-rdkafka",
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    return config


def consume_and_commit(bootstrap: str, group: str, protocol: str, topics: list[str],
                       expect: int, timeout: float = 90) -> None:
    """A librdkafka member that reads `expect` records, commits them, and leaves."""
    consumer = confluent_kafka.Consumer(consumer_config(bootstrap, group, protocol))
    consumer.subscribe(topics)
    seen, deadline = 0, time.monotonic() + timeout
    while seen < expect and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert seen == expect, f"{group} read {seen} of {expect}"


class LiveMember(threading.Thread):
    """A librdkafka member that reads `expect` records, commits once, and stays until stop()."""

    def __init__(self, bootstrap: str, group: str, protocol: str, topics: list[str], expect: int):
        super().__init__(daemon=True)
        self.config = consumer_config(bootstrap, group, protocol)
        self.topics, self.expect = topics, expect
        self.ready, self.done = threading.Event(), threading.Event()
        self.error = None
        self.member_id = None

    def run(self) -> None:
        try:
            consumer = confluent_kafka.Consumer(self.config)
            consumer.subscribe(self.topics)
            seen = 0
            while not self.done.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    seen += 1
                if seen >= self.expect and not self.ready.is_set():
                    consumer.commit(asynchronous=False)
                    self.member_id = consumer.memberid()
                    self.ready.set()
            consumer.close()
        except Exception as e:  # surfaces in the fixture, not as a hung thread
            self.error = e
            self.ready.set()

    def wait_ready(self, timeout: float = 90) -> None:
        assert self.ready.wait(timeout), f"{self.config['group.id']} never got its records"
        assert self.error is None, self.error

    def stop(self) -> None:
        self.done.set()
        self.join(60)


def java_consume(kafka, group: str, protocol: str, topics: list[str], expect: int, metadata: str):
    return kafka.java_clients("consume", {"group.id": group, "group.protocol": protocol,
                                          "client.id": f"{group}-java", "max.poll.records": 7},
                              {"topics": topics, "expect": expect, "commit_every": 7,
                               "commit_metadata": metadata, "timeout_ms": 90000})


TXN_SCRIPT = [
    {"begin": True}, {"send": {"topic": "txn-out", "key": "a", "value": "one"}},
    {"offsets": {"group": TXN_APP, "offsets": [{"topic": "orders", "partition": 0, "offset": 4}]}},
    {"commit": True},
    {"begin": True}, {"send": {"topic": "txn-out", "key": "b", "value": "two"}},
    {"offsets": {"group": TXN_APP, "offsets": [{"topic": "orders", "partition": 0, "offset": 9},
                                               {"topic": "orders", "partition": 1, "offset": 2}]}},
    {"abort": True},
    {"begin": True}, {"send": {"topic": "txn-out", "key": "c", "value": "three"}},
    {"offsets": {"group": TXN_APP, "offsets": [{"topic": "orders", "partition": 2, "offset": 6,
                                                "metadata": "txn"}]}},
    {"commit": True},
]


def committed_views(kafka) -> dict:
    def one(group):
        return kafka.java_clients("committed", {"group.id": group}, {"partitions": ALL_PARTITIONS})
    with ThreadPoolExecutor(3) as pool:
        views = {}
        for events in pool.map(one, GROUPS):
            views.update(committed_events(events))
        return views


def snapshot(kafka) -> SimpleNamespace:
    """kafka-consumer-groups' view of every group, and kinspect's from the broker and log dir."""
    described = kafka.consumer_groups("--describe", "--all-groups")
    members = kafka.consumer_groups("--describe", "--all-groups", "--members")
    state = kafka.consumer_groups("--describe", "--all-groups", "--state")
    live = {g: read_live(kafka.bootstrap, g) for g in GROUPS}
    log_dir = {g: read_log_dir(kafka.log_dir, g) for g in GROUPS}
    states = {r["GROUP"]: r for block in describe_blocks(state) for r in block}
    return SimpleNamespace(
        offsets=describe_offsets(described),
        members={(r["GROUP"], r["CONSUMER-ID"]): r for block in describe_blocks(members)
                 for r in block},
        states=states, listed=set(states),  # --all-groups describes what --list lists
        live=live, live_list=read_live(kafka.bootstrap),
        log_dir=log_dir, log_dir_list=read_log_dir(kafka.log_dir))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_lab_host()
    work = tmp_path_factory.mktemp("offsets-oracle")
    capture = work / "offsets.pcap"
    with KafkaBroker(KAFKA_4) as kafka:
        kafka.compile_java(LAB_FILES / "LabClients.java")  # once, before threads share it
        with Recorder(capture, "lo", f"tcp port {kafka.port}"):
            create_topics(kafka.bootstrap, TOPICS)
            produce(kafka.bootstrap, {"orders": 3, "payments": 2}, PER_PARTITION)
            with ThreadPoolExecutor(3) as pool:
                jobs = [pool.submit(java_consume, kafka, CLASSIC_APP, "classic",
                                    ["orders", "payments"], 50, "classic"),
                        pool.submit(java_consume, kafka, MODERN_APP, "consumer", ["orders"], 30,
                                    "modern"),
                        pool.submit(kafka.java_clients, "produce",
                                    {"transactional.id": "txn-app-producer"}, TXN_SCRIPT)]
                pool.submit(consume_and_commit, kafka.bootstrap, GONE_CLASSIC, "classic",
                            ["orders"], 30).result()
                pool.submit(consume_and_commit, kafka.bootstrap, GONE_MODERN, "consumer",
                            ["orders"], 30).result()
                for job in jobs:
                    job.result()
            for group in (GONE_CLASSIC, GONE_MODERN):
                kafka.consumer_groups("--delete", "--group", group)
            kafka.consumer_groups("--delete-offsets", "--group", CLASSIC_APP, "--topic", "payments")
            live = [LiveMember(kafka.bootstrap, LIVE_CLASSIC, "classic", ["orders"], 30),
                    LiveMember(kafka.bootstrap, LIVE_MODERN, "consumer", ["payments"], 20)]
            for member in live:
                member.start()
            for member in live:
                member.wait_ready()
            time.sleep(3)  # the modern member's last heartbeat acknowledges its assignment
            during = snapshot(kafka)
            committed = committed_views(kafka)
            for member in live:
                member.stop()
            time.sleep(1)
            after = snapshot(kafka)
        kafka.stop()
        offsets_dirs = sorted(p for p in kafka.log_dir.glob("__consumer_offsets-*")
                              if any(f.stat().st_size for f in p.glob("*.log")))
        dumps = {d.name: dump_log_records(kafka.dump_log(*sorted(d.glob("*.log")),
                                                         decoder="offsets"))
                 for d in offsets_dirs}
        segments = {d.name: read_segments(sorted(d.glob("*.log")), history=True)
                    for d in offsets_dirs}
        stopped = {g: read_log_dir(kafka.log_dir, g, history=True) for g in GROUPS}
        yield SimpleNamespace(
            during=during, after=after, committed=committed, dumps=dumps, segments=segments,
            stopped=stopped, members={m.config["group.id"]: m.member_id for m in live},
            capture=read_capture(str(capture), ports={kafka.port}),
            capture_commits_only=_capture_without_fetches(capture, kafka.port))


def _capture_without_fetches(path, port):
    replay = CaptureReplay()
    for record in DecodeRun(str(path), ports={port}).records():
        if record.get("api_key") != 9:  # commits, transactions and deletions only
            replay.exchange(record)
    return replay.finish()


def offsets_of(view) -> dict:
    return {(g, t, p): c for g, group in view.groups.items() for (t, p), c in group.offsets.items()}


def expected_offsets(snap) -> dict:
    return {key: row["CURRENT-OFFSET"] for key, row in snap.offsets.items()
            if row["CURRENT-OFFSET"] is not None}


# -- the scenario did what it meant to ------------------------------------------------------

def test_kafka_saw_the_scenario(lab):
    offsets = expected_offsets(lab.after)
    assert {g for g, _, _ in offsets} == {CLASSIC_APP, MODERN_APP, TXN_APP, LIVE_CLASSIC, LIVE_MODERN}
    assert offsets[(TXN_APP, "orders", 0)] == 4 and offsets[(TXN_APP, "orders", 2)] == 6
    assert (TXN_APP, "orders", 1) not in offsets
    assert not [k for k in offsets if k[0] == CLASSIC_APP and k[1] == "payments"]
    assert lab.during.states[LIVE_CLASSIC]["#MEMBERS"] == 1
    assert lab.during.states[LIVE_MODERN]["#MEMBERS"] == 1
    assert lab.after.listed == {CLASSIC_APP, MODERN_APP, TXN_APP, LIVE_CLASSIC, LIVE_MODERN}


# -- offsets: every source agrees with kafka-consumer-groups and committed() ----------------

@pytest.mark.parametrize("moment", ["during", "after"])
def test_live_broker_offsets_lag_and_owners(lab, moment):
    snap = getattr(lab, moment)
    for (group, topic, partition), row in snap.offsets.items():
        view = snap.live[group]
        commit = view.groups[group].offsets.get((topic, partition))
        assert (commit.offset if commit else None) == row["CURRENT-OFFSET"], (group, topic, partition)
        assert view.log_end_offsets.get((topic, partition)) == row["LOG-END-OFFSET"]
        assert _owner(view, group, topic, partition) == (row["CONSUMER-ID"], row["HOST"],
                                                         row["CLIENT-ID"])


@pytest.mark.parametrize("moment", ["during", "after"])
def test_log_dir_of_the_running_broker(lab, moment):
    snap = getattr(lab, moment)
    for (group, topic, partition), row in snap.offsets.items():
        view = snap.log_dir[group]
        commit = view.groups[group].offsets.get((topic, partition))
        assert (commit.offset if commit else None) == row["CURRENT-OFFSET"], (group, topic, partition)
        assert view.log_end_offsets.get((topic, partition)) == row["LOG-END-OFFSET"]
        assert _owner(view, group, topic, partition) == (row["CONSUMER-ID"], row["HOST"],
                                                         row["CLIENT-ID"])


def test_log_dir_and_segments_after_the_broker_stopped(lab):
    expected = expected_offsets(lab.after)
    from_log_dir = {}
    for group, view in lab.stopped.items():
        from_log_dir.update({k: c.offset for k, c in offsets_of(view).items()})
    from_segments = {}
    for view in lab.segments.values():
        from_segments.update({k: c.offset for k, c in offsets_of(view).items()
                              if view.groups[k[0]].exists})
    assert from_log_dir == expected
    assert from_segments == expected


def test_capture(lab):
    expected = expected_offsets(lab.after)
    assert {k: c.offset for k, c in offsets_of(lab.capture).items()} == expected
    assert {k: c.offset for k, c in offsets_of(lab.capture_commits_only).items()} == expected
    for (group, topic, partition), row in lab.after.offsets.items():
        assert lab.capture.log_end_offsets.get((topic, partition)) == row["LOG-END-OFFSET"]


def test_every_source_agrees_with_the_groups_own_committed_view(lab):
    sources = {"live": {}, "log dir": {}, "capture": offsets_of(lab.capture),
               "segments": {}}
    for group in GROUPS:
        sources["live"].update(offsets_of(lab.after.live[group]))
        sources["log dir"].update(offsets_of(lab.stopped[group]))
    for view in lab.segments.values():
        sources["segments"].update({k: c for k, c in offsets_of(view).items()
                                    if view.groups[k[0]].exists})
    assert any(v is not None for v in lab.committed.values())
    for name, found in sources.items():
        for key, seen in lab.committed.items():
            commit = found.get(key)
            if seen is None:
                assert commit is None, (name, key)
            else:
                assert commit is not None, (name, key)
                assert (commit.offset, commit.metadata) == (seen["offset"], seen["metadata"]), (name, key)


# -- members and state ------------------------------------------------------------------------

def test_members_while_they_are_there(lab):
    for group in (LIVE_CLASSIC, LIVE_MODERN):
        [(_, member_id)] = [k for k in lab.during.members if k[0] == group]
        assert member_id == lab.members[group]
        row = lab.during.members[(group, member_id)]
        for source in (lab.during.live[group], lab.during.log_dir[group]):
            member = source.groups[group].members[member_id]
            assert (member.client_host, member.client_id) == (row["HOST"], row["CLIENT-ID"])
            assert len(member.assignment) == row["#PARTITIONS"]


@pytest.mark.parametrize("moment", ["during", "after"])
def test_state_and_member_count(lab, moment):
    snap = getattr(lab, moment)
    for group, row in snap.states.items():
        for source in (snap.live[group], snap.log_dir[group]):
            found = source.groups[group]
            assert (found.state, len(found.members)) == (row["STATE"], row["#MEMBERS"]), group
    listed = {g for g, group in snap.live_list.groups.items() if group.state != "Dead"}
    assert listed == snap.listed
    assert {g for g, group in snap.log_dir_list.groups.items() if group.exists} == snap.listed


def test_capture_sees_the_final_state_kafka_consumer_groups_asked_for(lab):
    for group, row in lab.after.states.items():
        assert lab.capture.groups[group].state == row["STATE"]


def test_deleted_groups_are_dead_everywhere(lab):
    for group in (GONE_CLASSIC, GONE_MODERN):
        assert lab.stopped[group].groups[group].state == "Dead"
        assert lab.during.log_dir[group].groups[group].offsets == {}
        assert group not in lab.during.live[group].groups
        assert lab.capture.groups[group].offsets == {}
        assert group not in lab.after.listed


# -- record by record: kafka-dump-log --offsets-decoder ----------------------------------------

def test_every_commit_record_agrees_with_kafka_dump_log(lab):
    compared = sum(check_history_against_dump(records, lab.segments[partition].history)
                   for partition, records in lab.dumps.items())
    assert compared > 20
    outcomes = {c.outcome for view in lab.segments.values() for c in view.history}
    assert {COMMITTED, ABORTED, DELETED} <= outcomes


def _owner(view, group, topic, partition):
    for member in view.groups[group].members.values():
        if (topic, partition) in [(view.topic_names.get(t, t), p) for t, p in member.assignment]:
            return member.member_id, member.client_host, member.client_id
    return None, None, None

