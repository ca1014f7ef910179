"""hanging_transaction (log dir alone): KIP-664's join of three sources of one broker's data.

- ``__transaction_state``: the coordinator's last word per transactional id (producer id and
  epoch, state, partitions, start time, timeout); tombstones delete.
- each partition's segments: per producer id, a transactional batch opens a transaction that the
  producer's next COMMIT or ABORT control record closes.
- each partition's newest producer snapshot: producers whose transaction was open at its offset
  (current_txn_first_offset), for segments deleted since.

A transaction open in a partition is:
- "ongoing" (warning) when the coordinator holds it Ongoing (or preparing) with that partition,
  within its timeout;
- "past_timeout" (error) when the coordinator holds it so past its timeout: it should have been
  aborted;
- "hanging" (error, KIP-664) when the coordinator does not hold it: no state, another producer
  id or epoch, or a completed state; only an operator's abort ends it.
"Now" for a log dir is the newest timestamp in it (records and coordinator updates), not the
clock of the machine reading it. Sans-I/O: ``logdir.read_transactions`` feeds the events."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.finding import ERROR, WARNING, finding
from kinspect.doctor.options import DEFAULTS, Thresholds

NAME = "hanging_transaction"
ACTIVE = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


class _Open:
    __slots__ = ("first_offset", "first_time", "epoch", "where")

    def __init__(self, first_offset, first_time, epoch, where):
        self.first_offset, self.first_time, self.epoch, self.where = first_offset, first_time, epoch, where


class TransactionsJoin:
    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.coordinator: Bounded[dict] = Bounded("transactional ids", thresholds.max_state, dict)
        self.open: Bounded[dict] = Bounded("partitions with open transactions", thresholds.max_state, dict)
        self.now = 0  # ms

    @property
    def bounded(self):
        return [self.coordinator, self.open]

    def _saw(self, ms) -> None:
        if isinstance(ms, int) and ms > self.now:
            self.now = ms

    def transaction_record(self, record: dict) -> None:
        """A decoded __transaction_state record (kinspect.storage's event shape)."""
        key = record.get("key")
        txn_id = key.get("transactional_id") if isinstance(key, dict) else None
        if txn_id is None:
            return
        value = record.get("value")
        if record.get("tombstone") or not isinstance(value, dict):
            self.coordinator.pop(txn_id)
            return
        self._saw(value.get("transaction_last_update_timestamp_ms"))
        self.coordinator.at(txn_id).update(
            producer_id=value.get("producer_id"), producer_epoch=value.get("producer_epoch"),
            state=record.get("state"), timeout_ms=value.get("transaction_timeout_ms"),
            started=value.get("transaction_start_timestamp_ms"),
            partitions={(t.get("topic"), p) for t in value.get("transaction_partitions") or ()
                        for p in t.get("partition_ids") or ()})

    def batch(self, topic: str, partition: int, batch: dict, where: str) -> None:
        """A data partition's batch header (with its control type for control batches)."""
        self._saw(batch.get("max_timestamp"))
        producer_id = batch.get("producer_id")
        if not batch.get("is_transactional") or not isinstance(producer_id, int) or producer_id < 0:
            return
        held = self.open.at((topic, partition))
        if batch.get("is_control"):
            held.pop(producer_id, None)
        elif producer_id not in held:
            held[producer_id] = _Open(batch.get("base_offset"), batch.get("max_timestamp"),
                                      batch.get("producer_epoch"), where)

    def snapshot(self, topic: str, partition: int, offset: int, producers: list[dict], where: str,
                 first_logged: int | None) -> None:
        """The newest producer snapshot of a partition (at ``offset``): transactions open then
        that started before the oldest segment left (``first_logged``) are not in any batch."""
        held = self.open.at((topic, partition))
        for producer in producers:
            first = producer.get("current_txn_first_offset")
            pid = producer.get("producer_id")
            if first is None or pid in held or first_logged is not None and first >= first_logged:
                continue
            held[pid] = _Open(first, producer.get("last_timestamp"), producer.get("producer_epoch"), where)

    def finish(self):
        by_producer = {}
        for txn_id, state in self.coordinator.items.items():
            by_producer.setdefault(state.get("producer_id"), []).append((txn_id, state))
        found: dict = {}
        for (topic, partition), held in self.open.items.items():
            for producer_id, opened in held.items():
                entry = found.setdefault(producer_id, {"partitions": [], "first_time": opened.first_time,
                                                       "epoch": opened.epoch, "where": []})
                entry["partitions"].append((topic, partition, opened.first_offset))
                if opened.first_time is not None and (entry["first_time"] is None
                                                      or opened.first_time < entry["first_time"]):
                    entry["first_time"] = opened.first_time
                entry["where"].append(opened.where)
        for producer_id, state in ((s["producer_id"], s) for _, s in self.coordinator.items.items()
                                   if s.get("state") in ACTIVE and s.get("producer_id") not in found):
            found[producer_id] = {"partitions": [], "first_time": state.get("started"),
                                  "epoch": state.get("producer_epoch"), "where": []}
        for producer_id, entry in sorted(found.items(), key=lambda item: str(item[0])):
            txn_id, state = (by_producer.get(producer_id) or [(None, {})])[0]
            yield self._finding(producer_id, txn_id, state, entry)

    def _finding(self, producer_id, txn_id, state, entry) -> dict:
        partitions = {(t, p) for t, p, _ in entry["partitions"]}
        coordinator_holds = state.get("state") in ACTIVE and (not partitions or partitions <= state["partitions"])
        started = state.get("started") if coordinator_holds and (state.get("started") or -1) >= 0 \
            else entry["first_time"]
        timeout = state.get("timeout_ms") or 60_000
        age_ms = self.now - started if isinstance(started, int) and started >= 0 else None
        if not coordinator_holds:
            severity, kind = ERROR, "hanging"
            why = ("the coordinator holds no transaction for it" if not state else
                   f"the coordinator's state is {state.get('state')} for producer id "
                   f"{state.get('producer_id')} epoch {state.get('producer_epoch')}")
            why = f"open in the partitions but {why}: only kafka-transactions abort ends it (KIP-664)"
        elif age_ms is not None and age_ms > timeout:
            severity, kind = ERROR, "past_timeout"
            why = f"Ongoing for {age_ms / 1000:.1f} s, past its {timeout / 1000:g} s timeout"
        else:
            severity, kind = WARNING, "ongoing"
            why = "Ongoing at the coordinator" + (f" for {age_ms / 1000:.1f} s of its {timeout / 1000:g} s timeout"
                                                  if age_ms is not None else "")
        names = sorted({f"{t}-{p}" for t, p in partitions | (state.get("partitions") or set())
                        if coordinator_holds or (t, p) in partitions})
        who = txn_id if txn_id is not None else f"producer id {producer_id}"
        return finding(NAME, severity, f"transaction of {who} is open: {why}", (),
                       transactional_id=txn_id, producer_id=producer_id,
                       producer_epoch=state.get("producer_epoch", entry["epoch"]), partitions=names,
                       open_since=started / 1000 if isinstance(started, int) and started >= 0 else None,
                       state=kind, coordinator_state=state.get("state"), timeout_ms=timeout,
                       first_offsets=[{"topic": t, "partition": p, "offset": o}
                                      for t, p, o in sorted(entry["partitions"], key=str)],
                       files=sorted(set(entry["where"]))[:10], source="log_dir")
