from kinspect.storage.dump import increment_sequence
from tests.unit.storage.conftest import (KAFKA4, KAFKAFUN, LEGACY, SEGMENT, SOC, events, need,
                                         of_type, problems_of)


def test_segment_events_and_summary():
    found = events(SOC / SEGMENT)
    assert found[0]["type"] == "file" and found[0]["topic"] == "auth_events"
    batches = of_type(found, "batch")
    assert len(batches) == 2273 and all(b["crc_valid"] for b in batches)
    summary = found[-1]
    assert summary["type"] == "summary" and summary["items"] == 2273
    assert summary["record_count"] == 2273 and (summary["first_offset"],
                                                summary["last_offset"]) == (0, 2272)
    assert summary["problem_counts"] == {"error": 0, "warning": 0, "info": 0}
    assert "records" not in batches[0]


def test_records_and_internal_decoding_with_data():
    found = events(KAFKAFUN / "__consumer_offsets-27" / SEGMENT, records=True, data=True)
    records = [r for b in of_type(found, "batch") for r in b["records"]]
    assert records[0]["decoded"]["record_name"] == "GroupMetadata"
    assert records[1]["decoded"]["key"]["group"] == "my-second-app"
    assert problems_of(found) == []
    plain = events(KAFKAFUN / "__consumer_offsets-27" / SEGMENT, records=True)
    assert all("decoded" not in r for b in of_type(plain, "batch") for r in b["records"])


def test_kraft_snapshot_frame_is_checked():
    directory = need(KAFKA4 / "__cluster_metadata-0")
    snapshot = sorted(directory.glob("*.checkpoint"))[0]
    found = events(snapshot)
    assert found[0]["end_offset"] == int(snapshot.name[:20]) and found[0]["epoch"] == 1
    assert problems_of(found) == []
    batches = of_type(found, "batch")
    assert batches[0]["control"]["type"] == "SNAPSHOT_HEADER"
    assert batches[-1]["control"]["type"] == "SNAPSHOT_FOOTER"


def test_cut_off_kraft_snapshot(tmp_path):
    snapshot = sorted(need(KAFKA4 / "__cluster_metadata-0").glob("*.checkpoint"))[0]
    cut = tmp_path / snapshot.name
    cut.write_bytes(snapshot.read_bytes()[:-40])
    checks = [p.get("check") for p in problems_of(events(cut))]
    assert checks.count("kraft_snapshot") == 1 and "damage" in checks


def test_index_without_its_log_is_a_warning(tmp_path):
    index = tmp_path / "00000000000000000000.index"
    index.write_bytes((SOC / index.name).read_bytes())
    found = events(index)
    assert [p["check"] for p in problems_of(found)] == ["index_log"]
    assert len(of_type(found, "index_entry")) == 227


def test_txnindex_markers_checked_against_the_log():
    found = events(need(KAFKA4 / "transactions-1" / "00000000000000000000.txnindex"))
    assert len(of_type(found, "aborted_txn")) == 2 and problems_of(found) == []


def test_legacy_records_carry_their_crcs():
    found = events(need(LEGACY / "legacy-v1-gzip-0" / SEGMENT), records=True)
    records = [r for b in of_type(found, "batch") for r in b["records"]]
    assert all(isinstance(r["crc"], int) and r["crc_valid"] for r in records)
    assert len({r["crc"] for r in records}) == len(records)


def test_shallow_walk_skips_records_and_crc():
    found = events(SOC / SEGMENT, shallow=True, checks=False)
    batches = of_type(found, "batch")
    assert len(batches) == 2273 and all(b["crc_valid"] is None for b in batches)


def test_every_file_of_every_log_dir_dumps_without_exceptions():
    roots = [KAFKAFUN, SOC.parent] + [p for p in (KAFKA4, LEGACY) if p.exists()]
    kinds = set()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            found = events(path, records=True, data=True)
            kinds.add(found[0]["kind"])
            assert found[-1]["type"] == "summary"
            if found[0]["kind"] is not None and not path.name.endswith(".dump.txt"):
                errors = problems_of(found, ("error",))
                assert errors == [], (path, errors[:2])
    assert {"log", "index", "timeindex", "producer_snapshot", "leader_epoch_checkpoint",
            "offset_checkpoint", "partition_metadata", "meta_properties"} <= kinds


def test_sequence_wraps_like_kafka():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 2, 3) == 1


def test_control_records_carry_their_value_decoded_as_its_struct():
    snapshot = need(KAFKA4 / "__cluster_metadata-0" / "00000000000000000037-0000000001.checkpoint")
    header = of_type(events(snapshot, records=True), "batch")[0]
    assert header["control"]["type"] == "SNAPSHOT_HEADER"
    [record] = header["records"]
    assert record["control_value"] == {"struct": "SnapshotHeaderRecord", "version": 0,
                                       "data": {"version": 0,
                                                "last_contained_log_timestamp": 1795308683168}}
    data_batches = [b for b in of_type(events(snapshot, records=True), "batch") if not b["is_control"]]
    assert all("control_value" not in r for b in data_batches for r in b["records"])
