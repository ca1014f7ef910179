from kinspect.doctor.finding import WARNING
from kinspect.doctor.lag import Lag
from kinspect.doctor.options import Thresholds
from tests.unit.doctor.handmade import batch, commit, exchange, fetch, produce


def _run(records, **thresholds):
    check = Lag(Thresholds(**thresholds))
    for record in records:
        check.exchange(record)
    return check, list(check.finish(0))


def test_log_end_from_produce_responses_after_the_group_stopped_fetching():
    records = [fetch("t", 0, 100, 1.0), commit("g", "t", 0, 100, 1.1)]
    for i in range(40):  # the group is gone; producers go on: 40 batches of 100, one a second
        records.append(produce("t", 0, [batch(count=100, timestamp=1_000_000 + i * 1000)],
                               base_offset=100 + 100 * i, at=2.0 + i))
    check, [found] = _run(records)
    assert found["severity"] == WARNING
    assert (found["group"], found["topic"], found["partition"]) == ("g", "t", 0)
    assert (found["committed_offset"], found["log_end_offset"], found["lag"]) == (100, 4100, 4000)
    assert found["lag_seconds"] == 39.099  # the newest record's timestamp less that of the one at 100
    assert found["stalled"] is True and found["stalled_s"] == 39.9  # the commit → the last Produce response
    lags = [point["lag"] for point in found["series"]]
    assert lags[0] == 0 and lags[-1] == 4000 and lags == sorted(lags)


def test_a_group_catching_up_is_not_a_warning_however_far_behind():
    """The bench capture's consumers start behind producers writing 7,500 records/s: 11,000
    records and 4 s behind, committing as they go (a warning there before the stall rule)."""
    records = [produce("t", 0, [batch(count=1000, timestamp=1_000_000 + i * 100)], base_offset=1000 * i, at=i / 10)
               for i in range(100)]
    records += [commit("g", "t", 0, 500 * i, 2.0 + i / 10) for i in range(1, 100)]
    check, found = _run(records)
    [row] = check.rows()
    assert row["lag"] == 100_000 - 49_500 and row["stalled_s"] == 0.0
    assert found == []


def test_below_both_thresholds_nothing_but_the_row():
    check, found = _run([fetch("t", 0, 105, 1.0), commit("g", "t", 0, 100, 1.1)])
    assert found == []
    [row] = check.rows()
    assert (row["lag"], row["log_end_offset"]) == (5, 105)


def test_the_thresholds_are_options():
    records = [commit("g", "t", 0, 100, 1.0), fetch("t", 0, 105, 5.0)]
    assert _run(records)[1] == []
    assert len(_run(records, stalled_s=3.0)[1]) == 1
    assert _run(records, stalled_s=3.0, lag=6)[1] == []


def test_read_committed_groups_lag_to_the_last_stable_offset():
    open_transaction = batch(100, 4900, producer_id=4, epoch=0, sequence=0, transactional=True)
    check, found = _run([fetch("t", 0, 5000, 1.0, [open_transaction], isolation=1, stable=100),
                         commit("g", "t", 0, 90, 1.1)])
    [row] = check.rows()
    assert (row["isolation"], row["log_end_offset"], row["lag"]) == ("read_committed", 100, 10)
    assert found == []


def test_a_partition_never_written_transactionally_is_stable_at_its_log_end():
    """librdkafka fetches read_committed by default: a stale last stable offset from the group's
    last Fetch must not hide what producers wrote since (found on the lab scenario)."""
    records = [fetch("t", 0, 791, 1.0, isolation=1, stable=791), commit("g", "t", 0, 786, 1.1),
               produce("t", 0, [batch(count=3406)], base_offset=791, at=40.0)]
    check, [found] = _run(records)
    assert (found["log_end_offset"], found["lag"]) == (4197, 3411)


def test_rejected_commits_do_not_count_and_offset_fetch_does():
    fetched = exchange(9, {"groups": [{"group_id": "g", "topics": None}]},
                       {"groups": [{"group_id": "g", "error_code": 0, "topics": [
                           {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                         "error_code": 0}]}]}]}, at=0.5)
    check, _ = _run([fetched, fetch("t", 0, 2000, 1.0), commit("g", "t", 0, 1999, 1.1, error=22)])
    [row] = check.rows()
    assert (row["committed_offset"], row["lag"]) == (0, 2000)


def test_list_offsets_latest_is_a_log_end():
    listed = exchange(2, {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
                      {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0,
                                                                "offset": 1500}]}]}, at=5.0)
    check, _ = _run([commit("g", "t", 0, 200, 1.0), listed])
    [row] = check.rows()
    assert (row["lag"], row["lag_seconds"], row["stalled_s"]) == (1300, None, 4.0)
