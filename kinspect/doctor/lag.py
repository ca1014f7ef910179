"""lag: how far each group's committed offsets are behind the log end, as kafka-consumer-groups
computes LAG (log end minus committed offset), and how that moved over the capture.

The log end is whatever the capture showed last: a Fetch response's high watermark (its last
stable offset for a group whose consumers fetch read_committed), a ListOffsets (latest)
answer, or a Produce response's base offset plus the records its request carried (and one
more for each transaction marker the coordinator's WriteTxnMarkers wrote after them). A group that
stopped fetching still lags as producers go on. The committed offset comes from accepted
OffsetCommits, OffsetFetch answers and TxnOffsetCommits once their EndTxn committed.
Under read_committed (the group's consumers fetch so) the end is the last stable offset where
the partition holds transactions and the capture's newest log end came with one; a partition
never seen written transactionally has its last stable offset at its high watermark.
``lag_seconds`` is the newest record's timestamp minus that of the record at the committed
offset, from the record batches the capture holds (Produce requests, Fetch responses).

Severity: warning when the group is ``--max-lag-seconds`` behind (record time), or when it
stalled: its committed offset stood still for ``--stalled-after`` seconds up to the capture's
last sight of the log end, which was ``--max-lag`` records or more ahead of it (a group that
stopped consuming while production went on, or that is stuck short of the end). A group
catching up, however many records behind, is neither; nothing then (the series is still there
for ``--series``). ``stalled_s`` is that time: from the commit that last moved the offset to
the last log end seen."""

from __future__ import annotations

from bisect import bisect_left

from kinspect.doctor.bounded import Bounded, series_add
from kinspect.doctor.exchanges import batch_count, batches, ends, host, is_internal, topic_name
from kinspect.doctor.finding import WARNING, evidence, finding, when
from kinspect.doctor.options import DEFAULTS, Thresholds
from kinspect.groups.responses import fetched_groups

NAME = "lag"
PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 8, 9
JOIN_GROUP, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT, CONSUMER_HEARTBEAT = 11, 26, 27, 28, 68
APIS = frozenset({PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, END_TXN,
                  WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT, CONSUMER_HEARTBEAT})
LATEST = -1
SAMPLES = 1024       # (offset, timestamp) points kept per partition
WATCHERS = 100       # group partitions whose series follow one partition's log end
POINT_EVERY = 1.0    # seconds between two points of a series that the log end alone moved


class _Partition:
    __slots__ = ("end", "end_at", "stable", "stable_at", "transactional", "offsets", "stamps", "watchers")

    def __init__(self):
        self.end = self.stable = None
        self.end_at = self.stable_at = 0.0
        self.transactional = False  # transactional batches seen: the last stable offset may trail
        self.offsets: list = []   # sampled offsets, increasing, and their record timestamps
        self.stamps: list = []
        self.watchers: list = []  # the _Committed following this partition


class _Committed:
    __slots__ = ("group", "topic", "partition", "offset", "at", "advanced_at", "evidence", "series", "point_at")

    def __init__(self):
        self.offset = None
        self.at = self.point_at = self.advanced_at = 0.0
        self.evidence = None
        self.series: list = []


class Lag:
    name = NAME
    apis = APIS

    def __init__(self, thresholds: Thresholds = DEFAULTS):
        self.t = thresholds
        self.partitions: Bounded[_Partition] = Bounded("partitions", thresholds.max_state, _Partition)
        self.committed: Bounded[_Committed] = Bounded("committed offsets", thresholds.max_state,
                                                      _Committed)
        self.clients: Bounded[dict] = Bounded("clients", thresholds.max_state, dict)
        self.pending: Bounded[list] = Bounded("transactional commits", thresholds.max_state, list)

    @property
    def bounded(self):
        return [self.partitions, self.committed, self.clients, self.pending]

    def exchange(self, record: dict) -> None:
        if record["api_key"] == WRITE_TXN_MARKERS:  # the coordinator's, through the port
            self._marked(record)
            return
        if is_internal(record):
            return
        response = record.get("response")
        request = record.get("request") or {}
        api_key = record["api_key"]
        if api_key == PRODUCE:
            if response is not None:
                self._produced(request, response, when(record))
        elif api_key == FETCH:
            self._client(record)["isolation"] = request.get("isolation_level", 0)
            if response is not None:
                self._fetched(response, when(record))
        elif api_key == LIST_OFFSETS:
            if response is not None:
                self._listed(request, response, when(record))
        elif api_key in (OFFSET_COMMIT, JOIN_GROUP, CONSUMER_HEARTBEAT, TXN_OFFSET_COMMIT):
            group_id = request.get("group_id")
            if isinstance(group_id, str):
                self._client(record).setdefault("groups", set()).add(group_id)
                if api_key == OFFSET_COMMIT and response is not None:
                    self._commits(record, group_id, request, response)
                elif api_key == TXN_OFFSET_COMMIT and response is not None:
                    self._commits(record, group_id, request, response, request.get("producer_id"))
        elif api_key == OFFSET_FETCH and response is not None:
            for group_id, error, topics in fetched_groups(response, request):
                if error or not isinstance(group_id, str):
                    continue
                for topic in topics:
                    for p in topic.get("partitions") or ():
                        offset = p.get("committed_offset")
                        if not p.get("error_code") and isinstance(offset, int) and offset >= 0:
                            self._commit(group_id, topic_name(topic), p.get("partition_index"),
                                         offset, record)
        elif api_key == END_TXN and response is not None and not response.get("error_code"):
            held = self.pending.pop(request.get("producer_id"), None)
            if held and request.get("committed"):
                for group_id, topic, partition, offset in held:
                    self._commit(group_id, topic, partition, offset, record)

    # -- the log end -----------------------------------------------------------------------

    def _produced(self, request, response, at) -> None:
        sent = {}
        for topic in request.get("topic_data") or ():
            for p in topic.get("partition_data") or ():
                sent[(topic_name(topic), p.get("index"))] = batches(p.get("records"))
        for topic in response.get("responses") or ():
            name = topic_name(topic)
            for p in topic.get("partition_responses") or ():
                base = p.get("base_offset")
                held = sent.get((name, p.get("index")))
                if p.get("error_code") or not isinstance(base, int) or base < 0 or not held:
                    continue
                part = self.partitions.at((name, p.get("index")))
                appended = p.get("log_append_time_ms")
                offset = base
                for batch in held:
                    count = batch_count(batch)
                    part.transactional = part.transactional or bool(batch.get("is_transactional"))
                    log_append = isinstance(appended, int) and appended >= 0
                    _sample(part, offset, appended if log_append else batch.get("base_timestamp"))
                    _sample(part, offset + count - 1, appended if log_append else batch.get("max_timestamp"))
                    offset += count
                self._end(part, offset, None, at)

    def _fetched(self, response, at) -> None:
        for topic in response.get("responses") or ():
            name = topic_name(topic)
            for p in topic.get("partitions") or ():
                watermark = p.get("high_watermark")
                if p.get("error_code") or not isinstance(watermark, int) or watermark < 0:
                    continue
                part = self.partitions.at((name, p.get("partition_index")))
                part.transactional = part.transactional or bool(p.get("aborted_transactions"))
                for batch in batches(p.get("records")):
                    part.transactional = part.transactional or bool(batch.get("is_transactional"))
                    base = batch.get("base_offset")
                    if isinstance(base, int) and not batch.get("is_control"):
                        _sample(part, base, batch.get("base_timestamp"))
                        _sample(part, base + batch_count(batch) - 1, batch.get("max_timestamp"))
                stable = p.get("last_stable_offset")
                self._end(part, watermark, stable if isinstance(stable, int) and stable >= 0 else None, at)

    def _marked(self, record) -> None:
        """A COMMIT or ABORT marker written takes one offset of each data partition it went to."""
        for marker in (record.get("response") or {}).get("markers") or ():
            for topic in marker.get("topics") or ():
                name = topic_name(topic)
                for p in topic.get("partitions") or ():
                    part = self.partitions.get((name, p.get("partition_index")))
                    if part is not None and part.end is not None and not p.get("error_code"):
                        self._end(part, part.end + 1, None, when(record))

    def _listed(self, request, response, at) -> None:
        latest = {(topic_name(t), p.get("partition_index")) for t in request.get("topics") or ()
                  for p in t.get("partitions") or () if p.get("timestamp") == LATEST}
        for topic in response.get("topics") or ():
            name = topic_name(topic)
            for p in topic.get("partitions") or ():
                key = (name, p.get("partition_index"))
                if key not in latest or p.get("error_code"):
                    continue
                offset = p.get("offset")
                if offset is None and p.get("old_style_offsets"):
                    offset = p["old_style_offsets"][0]
                if isinstance(offset, int) and offset >= 0:
                    self._end(self.partitions.at(key), offset, None, at)

    def _end(self, part: _Partition, end: int, stable: int | None, at: float) -> None:
        if at < part.end_at:
            return
        part.end, part.end_at = end, at
        if stable is not None:
            part.stable, part.stable_at = stable, at
        for watcher in part.watchers:
            if at - watcher.point_at >= POINT_EVERY:
                self._point(watcher, part, at)

    # -- committed offsets -----------------------------------------------------------------

    def _commits(self, record, group_id, request, response, producer_id=None) -> None:
        accepted = {(topic_name(t), p.get("partition_index"))
                    for t in response.get("topics") or () for p in t.get("partitions") or ()
                    if not p.get("error_code")}
        for topic in request.get("topics") or ():
            name = topic_name(topic)
            for p in topic.get("partitions") or ():
                offset = p.get("committed_offset")
                partition = p.get("partition_index")
                if (name, partition) not in accepted or not isinstance(offset, int) or offset < 0:
                    continue
                if producer_id is None:
                    self._commit(group_id, name, partition, offset, record)
                else:
                    held = self.pending.at(producer_id)
                    if len(held) < WATCHERS * 10:
                        held.append((group_id, name, partition, offset))

    def _commit(self, group_id, topic, partition, offset, record) -> None:
        key = (group_id, topic, partition)
        fresh = key not in self.committed
        entry = self.committed.at(key)
        at = when(record)
        if at < entry.at:
            return
        entry.group, entry.topic, entry.partition = key
        if entry.offset is None or offset != entry.offset:
            entry.advanced_at = at
        entry.offset, entry.at, entry.evidence = offset, at, evidence(record)
        part = self.partitions.at((topic, partition))
        if fresh and len(part.watchers) < WATCHERS:
            part.watchers.append(entry)
        self._point(entry, part, at)

    def _point(self, entry: _Committed, part: _Partition, at: float) -> None:
        if entry.offset is None or part.end is None:
            return
        entry.point_at = at
        series_add(entry.series, (at, max(0, part.end - entry.offset)), self.t.series)

    def _client(self, record) -> dict:
        client, _ = ends(record.get("conn"))
        return self.clients.at((host(client), record.get("client_id")))

    # -- findings --------------------------------------------------------------------------

    def rows(self) -> list[dict]:
        """Every group partition's lag at the end of the capture, with its series."""
        committed_groups = {g for c in self.clients.values() if c.get("isolation") == 1
                            for g in c.get("groups", ())}
        out = []
        for entry in self.committed.values():
            part = self.partitions.get((entry.topic, entry.partition))
            if part is None or part.end is None:
                continue
            read_committed = entry.group in committed_groups
            end = part.end
            if read_committed and part.transactional and part.stable is not None and part.stable_at >= part.end_at:
                end = part.stable
            lag = max(0, end - entry.offset)
            series = list(entry.series)
            last = max(part.end_at, entry.at)
            if not series or series[-1] != (last, lag):  # the series ends where the capture does
                series.append((last, lag))
            out.append({"group": entry.group, "topic": entry.topic, "partition": entry.partition,
                        "committed_offset": entry.offset, "log_end_offset": end,
                        "isolation": "read_committed" if read_committed else "read_uncommitted",
                        "lag": lag, "lag_seconds": _lag_seconds(part, entry.offset, end, lag),
                        "committed_at": entry.at, "log_end_at": part.end_at,
                        "stalled_s": round(max(0.0, part.end_at - entry.advanced_at), 3) if lag else 0.0,
                        "series": [{"time": t, "lag": n} for t, n in series],
                        "evidence": entry.evidence})
        return sorted(out, key=lambda r: (str(r["group"]), str(r["topic"]), r["partition"] or 0))

    def finish(self, end: float):
        for row in self.rows():
            seconds = row["lag_seconds"]
            late = seconds is not None and seconds >= self.t.lag_seconds
            stalled = row["lag"] >= self.t.lag and row["stalled_s"] >= self.t.stalled_s
            if not (late or stalled):
                continue
            behind = f", {seconds:.1f} s" if seconds is not None else ""
            why = (f"; its committed offset stood still for {row['stalled_s']:.1f} s while behind the log end"
                   if stalled else "")
            yield finding(NAME, WARNING,
                          f"group {row['group']} is {row['lag']} records{behind} behind on "
                          f"{row['topic']}-{row['partition']} (committed {row['committed_offset']}, "
                          f"log end {row['log_end_offset']}){why}",
                          [row["evidence"]], **{k: v for k, v in row.items() if k != "evidence"},
                          stalled=stalled)


def _sample(part: _Partition, offset: int, stamp) -> None:
    if not isinstance(stamp, int) or stamp < 0:
        return
    if part.offsets and offset <= part.offsets[-1]:
        if offset == part.offsets[-1]:
            part.stamps[-1] = max(part.stamps[-1], stamp)
        return
    part.offsets.append(offset)
    part.stamps.append(stamp)
    if len(part.offsets) > SAMPLES:
        half = len(part.offsets) // 2
        part.offsets[:half] = part.offsets[:half:2]
        part.stamps[:half] = part.stamps[:half:2]


def _lag_seconds(part: _Partition, committed: int, end: int, lag: int) -> float | None:
    if lag == 0:
        return 0.0
    if not part.offsets:
        return None
    at = bisect_left(part.offsets, committed)
    if at >= len(part.offsets):
        return None
    newest = bisect_left(part.offsets, end) - 1
    if newest < at:
        return None
    return round(max(0, part.stamps[newest] - part.stamps[at]) / 1000, 3)
