"""DecodeRun(keep_record=...): the runs of a partition of the records give one run's records."""

import json
import re
from collections import Counter, defaultdict

import pytest

from kinspect.decode.finish import TOPIC_NAMING
from kinspect.decode.pipeline import DecodeRun
from kinspect.render.jsonl import pieces
from kinspect.spark.plan import Shard, connection_shard
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
    parts = [_lines(DecodeRun(str(capture), keep_record=lambda r, i=i: connection_shard(r.get("conn", ""), shards) == i))
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
        alone = _lines(DecodeRun(str(capture), keep_record=lambda r: r.get("conn", "") == conn))
        assert [line for _, line in alone] == lines


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_exchanges_dealt_by_load_give_one_runs_records(capture):
    """plan.Shard: every shard deals each exchange alike, so each line comes out of exactly one,
    and each connection's lines keep their order within a shard."""
    whole = _lines(DecodeRun(str(capture)))
    parts = [_lines(DecodeRun(str(capture), keep_record=Shard(i, 3))) for i in range(3)]
    assert Counter(line for part in parts for line in part) == Counter(whole)
    order = {line: n for n, (_, line) in enumerate(whole)}
    for part in parts:
        for lines in _by_conn(part).values():
            positions = [order[line] for line in lines]
            assert positions == sorted(positions)


def _versions(text: str, top: int) -> set:
    if text == "none":
        return set()
    if text.endswith("+"):
        return set(range(int(text[:-1]), top + 1))
    first, _, last = text.partition("-")
    return set(range(int(first), int(last or first) + 1))


def test_topic_naming_is_every_response_version_carrying_topic_ids_with_names():
    """From Kafka's specs: responses whose topic entries hold TopicId and Name at one version,
    from the first such version. Produce, OffsetCommit and AlterPartition hold them at different
    versions only: decoding them can never teach a name."""
    first: dict = {}
    for spec in SPECS.glob("*/**/*Response.json"):
        message = json.loads(re.sub(r"//.*", "", spec.read_text()))
        numbers = re.findall(r"\d+", message["validVersions"])  # "none" for an API Kafka retired
        if not numbers:
            continue
        top = int(numbers[-1])
        for field in message.get("fields", []):
            entry = {f["name"]: f for f in field.get("fields", [])}
            name = entry.get("Name") or entry.get("TopicName")
            if "TopicId" not in entry or name is None:
                continue
            both = (_versions(entry["TopicId"]["versions"], top) & _versions(name["versions"], top)
                    & _versions(field["versions"], top))
            if both:
                key = message["apiKey"]
                first[key] = min(first.get(key, min(both)), min(both))
    assert first == TOPIC_NAMING
