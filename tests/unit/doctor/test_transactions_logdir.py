from kinspect.doctor.finding import ERROR, WARNING
from kinspect.doctor.transactions_logdir import TransactionsJoin
from tests.unit.doctor.handmade import batch

T0 = 1_700_000_000_000


def _state(txn_id, producer_id, state, partitions=(), started=-1, updated=T0, timeout_ms=60_000, epoch=0):
    return {"key": {"transactional_id": txn_id}, "tombstone": False, "state": state,
            "value": {"producer_id": producer_id, "producer_epoch": epoch, "transaction_timeout_ms": timeout_ms,
                      "transaction_partitions": [{"topic": t, "partition_ids": [p]} for t, p in partitions],
                      "transaction_last_update_timestamp_ms": updated, "transaction_start_timestamp_ms": started}}


def _findings(states, batches, snapshots=()):
    join = TransactionsJoin()
    for state in states:
        join.transaction_record(state)
    for topic, partition, item in batches:
        join.batch(topic, partition, item, f"{topic}-{partition}/0.log")
    for args in snapshots:
        join.snapshot(*args)
    return list(join.finish())


def test_committed_transactions_are_no_finding():
    states = [_state("tx", 5, "Ongoing", [("t", 0)], started=T0), _state("tx", 5, "CompleteCommit", updated=T0 + 50)]
    batches = [("t", 0, batch(0, 3, 5, 0, 0, True, T0)), ("t", 0, batch(3, 1, 5, 0, -1, True, T0 + 40, control=True))]
    assert _findings(states, batches) == []


def test_open_in_the_partition_and_ongoing_at_the_coordinator_is_a_warning_within_its_timeout():
    states = [_state("tx", 5, "Ongoing", [("t", 0)], started=T0, updated=T0, timeout_ms=300_000)]
    batches = [("t", 0, batch(7, 5, 5, 0, 3, True, T0 + 10)), ("other", 0, batch(0, 1, timestamp=T0 + 20_000))]
    [found] = _findings(states, batches)
    assert found["severity"] == WARNING and found["state"] == "ongoing"
    assert (found["transactional_id"], found["producer_id"], found["partitions"]) == ("tx", 5, ["t-0"])
    assert found["first_offsets"] == [{"topic": "t", "partition": 0, "offset": 7}]
    assert found["open_since"] == T0 / 1000 and found["source"] == "log_dir"


def test_past_its_timeout_it_is_an_error():
    states = [_state("tx", 5, "Ongoing", [("t", 0)], started=T0, timeout_ms=10_000)]
    batches = [("t", 0, batch(0, 1, 5, 0, 0, True, T0)), ("t", 1, batch(0, 1, timestamp=T0 + 60_000))]
    [found] = _findings(states, batches)
    assert found["severity"] == ERROR and found["state"] == "past_timeout"


def test_open_in_a_partition_the_coordinator_does_not_hold_is_hanging():
    states = [_state("tx", 5, "CompleteAbort", updated=T0 + 10)]
    batches = [("t", 0, batch(0, 2, 5, 0, 0, True, T0))]
    [found] = _findings(states, batches)
    assert found["severity"] == ERROR and found["state"] == "hanging" and found["coordinator_state"] == "CompleteAbort"
    [alone] = _findings([], batches)
    assert alone["state"] == "hanging" and alone["transactional_id"] is None


def test_a_snapshot_holds_a_transaction_older_than_the_segments_left():
    producers = [{"producer_id": 9, "producer_epoch": 2, "current_txn_first_offset": 40, "last_timestamp": T0}]
    [found] = _findings([], [], [("t", 0, 100, producers, "t-0/100.snapshot", 50)])
    assert found["producer_id"] == 9 and found["state"] == "hanging"
    assert _findings([], [], [("t", 0, 100, producers, "t-0/100.snapshot", 40)]) == []
