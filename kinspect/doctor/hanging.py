"""hanging_transaction (captures): a transaction begun and never ended.

A transaction begins with a producer's AddPartitionsToTxn, AddOffsetsToTxn or transactional
Produce (KIP-890's second version adds partitions through Produce alone), and ends with its
EndTxn, the coordinator's WriteTxnMarkers for it, or an InitProducerId that bumps its epoch
(which aborts it). At the end of the capture, an open transaction whose producer sent nothing
more on any of its connections for ``--vanished-after`` seconds is a warning (state
"vanished": the producer went away mid-transaction); one open longer than its transaction
timeout (InitProducerId's transaction_timeout_ms, else Kafka's default 60 s) with no markers
seen is an error (state "past_timeout": hanging in KIP-664's sense, unless the coordinator's
abort is simply not in the capture). A transaction still moving is neither."""

from __future__ import annotations

from kinspect.doctor.bounded import Bounded
from kinspect.doctor.exchanges import batches, ends, is_internal, topic_name
from kinspect.doctor.finding import ERROR, WARNING, evidence, finding, iso, when
from kinspect.doctor.options import DEFAULTS, Thresholds

NAME = "hanging_transaction"
PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_TXN_MARKERS = 0, 22, 24, 25, 26, 27
TXN_OFFSET_COMMIT = 28
DEFAULT_TIMEOUT_MS = 60_000  # the producer's transaction.timeout.ms default
PARTITIONS = 1000            # partitions kept per transaction


class _Txn:
    __slots__ = ("transactional_id", "producer_id", "epoch", "timeout_ms", "open_since", "partitions",
                 "conns", "opened_by", "last")

    def __init__(self):
        self.transactional_id = None
        self.producer_id = self.epoch = None
        self.timeout_ms = None
        self.open_since = None
        self.partitions: set = set()
        self.conns: set = set()
        self.opened_by = self.last = None


class Hanging:
    name = NAME
    apis = None  # every exchange: a connection's last request says whether its producer is alive

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.t = thresholds
        self.producers: Bounded[_Txn] = Bounded("transactional producers", thresholds.max_state, _Txn)
        self.timeouts: Bounded[dict] = Bounded("transactional ids", thresholds.max_state, dict)
        self.conns: Bounded[dict] = Bounded("connections", thresholds.max_state, dict)

    @property
    def bounded(self):
        return [self.producers, self.timeouts, self.conns]

    def exchange(self, record: dict) -> None:
        api_key = record["api_key"]
        request = record.get("request") or {}
        response = record.get("response")
        if api_key == WRITE_TXN_MARKERS:
            for marker in request.get("markers") or ():
                self._ended(marker.get("producer_id"))
            return
        if is_internal(record):
            return
        conn = record.get("conn")
        self.conns.at(conn)["last"] = evidence(record)
        if api_key == INIT_PRODUCER_ID:
            txn_id = request.get("transactional_id")
            if txn_id is not None and response is not None and not response.get("error_code"):
                info = self.timeouts.at(txn_id)
                previous = info.get("producer_id")
                if previous is not None:
                    self._ended(previous)
                info.update(producer_id=response.get("producer_id"),
                            timeout_ms=request.get("transaction_timeout_ms"))
        elif api_key == ADD_PARTITIONS:
            for txn in request.get("transactions") or [request]:
                if txn.get("verify_only"):
                    continue
                parts = [(topic_name(t), p) for t in txn.get("topics") or () for p in t.get("partitions") or ()]
                self._begun(record, txn.get("transactional_id"), txn.get("producer_id"),
                            txn.get("producer_epoch"), parts)
        elif api_key in (ADD_OFFSETS, TXN_OFFSET_COMMIT):
            self._begun(record, request.get("transactional_id"), request.get("producer_id"),
                        request.get("producer_epoch"), [])
        elif api_key == PRODUCE and request.get("transactional_id") is not None:
            for topic in request.get("topic_data") or ():
                for p in topic.get("partition_data") or ():
                    for batch in batches(p.get("records")):
                        if batch.get("is_transactional") and not batch.get("is_control"):
                            self._begun(record, request.get("transactional_id"), batch.get("producer_id"),
                                        batch.get("producer_epoch"), [(topic_name(topic), p.get("index"))])
        elif api_key == END_TXN and response is not None:
            if not response.get("error_code"):
                self._ended(request.get("producer_id"))

    def _begun(self, record, txn_id, producer_id, epoch, partitions) -> None:
        if not isinstance(producer_id, int) or producer_id < 0:
            return
        txn = self.producers.at(producer_id)
        if txn.open_since is None:
            txn.open_since, txn.opened_by = record.get("request_time"), evidence(record)
        txn.transactional_id = txn_id if txn_id is not None else txn.transactional_id
        txn.producer_id, txn.epoch = producer_id, epoch
        if txn.transactional_id is not None:
            info = self.timeouts.get(txn.transactional_id)
            if info is not None and info.get("timeout_ms"):
                txn.timeout_ms = info["timeout_ms"]
        if len(txn.conns) < 16:
            txn.conns.add(record.get("conn"))
        for part in partitions:
            if len(txn.partitions) < PARTITIONS:
                txn.partitions.add(part)

    def _ended(self, producer_id) -> None:
        txn = self.producers.get(producer_id)
        if txn is not None:
            txn.open_since, txn.opened_by = None, None
            txn.partitions = set()

    def finish(self, end: float):
        for txn in self.producers.values():
            if txn.open_since is None:
                continue
            last = max((self.conns.items.get(c, {}).get("last") or txn.opened_by for c in txn.conns),
                       key=lambda e: e["time"] or 0.0)
            silent = end - (last["time"] or 0.0)
            timeout_ms = txn.timeout_ms or DEFAULT_TIMEOUT_MS
            age = end - txn.open_since
            if age * 1000 > timeout_ms:
                severity, state = ERROR, "past_timeout"
                why = (f"open {age:.1f} s, past its {timeout_ms / 1000:g} s transaction timeout, "
                       f"and no EndTxn or markers seen")
            elif silent >= self.t.vanished_s:
                severity, state = WARNING, "vanished"
                why = (f"open since {iso(txn.open_since)}; its producer sent nothing more for "
                       f"{silent:.1f} s before the capture ended (no EndTxn, no markers)")
            else:
                continue
            who = txn.transactional_id if txn.transactional_id is not None else f"producer id {txn.producer_id}"
            yield finding(NAME, severity, f"transaction of {who} never ended: {why}",
                          [txn.opened_by, last] if last is not txn.opened_by else [txn.opened_by],
                          transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                          producer_epoch=txn.epoch,
                          partitions=sorted(f"{t}-{p}" for t, p in txn.partitions),
                          open_since=txn.open_since, state=state, timeout_ms=timeout_ms,
                          silent_s=round(silent, 3), source="capture")
