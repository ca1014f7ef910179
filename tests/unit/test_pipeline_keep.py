"""DecodeRun(keep_connection=...): the runs of a partition of the connections give one run's records."""

import json
import re
from collections import Counter, defaultdict

import pytest

from kinspect.pipeline import TOPIC_NAMING_APIS, DecodeRun
from kinspect.render.jsonl import pieces
from kinspect.spark.plan import connection_shard
from tests.conftest import PCAPS, REALDATA, SPECS

CAPTURES = sorted(p for p in PCAPS.iterdir() if p.suffix in (".pcap", ".pcapng")) + \
    [REALDATA / "arkime/kafka.pcap", REALDATA / "go-sniffer/kafka.pcap", REALDATA / "ndpi/kafka.pcapng"]


def _lines(run) -> list[tuple[str, bytes]]:
    return [(r.get("conn", ""), b"".join(pieces(r, newline=True))) for r in run.records()]


def _by_conn(lines):
    out = defaultdict(list)
    for conn, line in lines:
        out[conn].append(line)
    return dict(out)


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
@pytest.mark.parametrize("shards", [2, 3])
def test_shards_together_give_one_runs_records(capture, shards):
    whole = _lines(DecodeRun(str(capture)))
    parts = [_lines(DecodeRun(str(capture), keep_connection=lambda c, i=i: connection_shard(c, shards) == i))
             for i in range(shards)]
    joined = [line for part in parts for line in part]
    assert Counter(joined) == Counter(whole)
    merged: dict = {}
    for part in parts:
        for conn, lines in _by_conn(part).items():
            assert conn not in merged or conn == ""
            merged.setdefault(conn, []).extend(lines)
    assert merged == _by_conn(whole)  # per connection, in order
    for i, part in enumerate(parts):  # each shard gave its own connections only
        assert {connection_shard(conn, shards) for conn, _ in part} <= {i}


def test_unkept_connections_still_teach_topic_names():
    """Produce v13 names topics by id: each connection decoded alone names them as the whole run
    does, though the Metadata that named them came on another connection."""
    capture = PCAPS / "java-console-producer.pcap"
    whole = _lines(DecodeRun(str(capture)))
    by_id = [line for _, line in whole if b'"topic_id"' in line and b'"topic":"' in line]
    assert by_id, "the capture holds exchanges naming topics by id"
    for conn, lines in _by_conn(whole).items():
        alone = _lines(DecodeRun(str(capture), keep_connection=lambda c: c == conn))
        assert [line for _, line in alone] == lines


def test_topic_naming_apis_are_the_responses_kafka_gives_topic_ids_and_names():
    keys = set()
    for spec in SPECS.glob("*/**/*Response.json"):
        text = re.sub(r"//.*", "", spec.read_text())
        message = json.loads(text)
        for field in message.get("fields", []):
            names = {f["name"] for f in field.get("fields", [])}
            if "TopicId" in names and names & {"Name", "TopicName"}:
                keys.add(message["apiKey"])
    assert keys == set(TOPIC_NAMING_APIS)
