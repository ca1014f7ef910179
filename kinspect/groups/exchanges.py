"""Committed offsets and group state from a capture's exchanges (kinspect decode's records).

    replay = CaptureReplay(group="orders-app", history=True)
    for record in DecodeRun(path).records():
        replay.exchange(record)
    view = replay.finish()

What counts, in the order the broker answered:
- OffsetCommit: each partition the response accepts (error 0) is committed; one it rejects is
  not, and one with no response seen is not known to be (both stay in the history);
- TxnOffsetCommit: accepted partitions are pending for the producer id until EndTxn (or the
  coordinator's WriteTxnMarkers to __consumer_offsets) commits or aborts that transaction;
- OffsetFetch responses: what the broker said was committed at that moment (-1: nothing);
- OffsetDelete / DeleteGroups that succeeded delete; DescribeGroups, ConsumerGroupDescribe
  and ListGroups responses give state and members; ListOffsets (latest) and Fetch responses'
  high watermarks give log end offsets, as do Produce responses (the base offset plus the records
  the request carried: a group that stopped fetching still lags as producers go on); Metadata
  responses name topic ids.
Sans-I/O: decoded exchange records in, a GroupsView out.
"""

from __future__ import annotations

import heapq

from kinspect.groups import responses
from kinspect.groups.model import (ABORTED, CLASSIC, COMMITTED, DELETED, PENDING, REJECTED,
                                   UNANSWERED, Commit, Group, GroupsView)
from kinspect.groups.responses import topic_of
from kinspect.wire.apis import error_name
from kinspect.wire.topics import TopicNames

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, END_TXN, WRITE_TXN_MARKERS = 15, 16, 42, 26, 27
TXN_OFFSET_COMMIT, OFFSET_DELETE, CONSUMER_GROUP_DESCRIBE = 28, 47, 69
LATEST = -1
OFFSETS_TOPIC = "__consumer_offsets"
REORDER = 10_000  # exchanges held to be applied in response-time order

_KEPT = {PRODUCE, FETCH, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS,
         DELETE_GROUPS, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT, OFFSET_DELETE,
         CONSUMER_GROUP_DESCRIBE}
REPLAYED_APIS = _KEPT | {METADATA}


class CaptureReplay:
    def __init__(self, *, group: str | None = None, history: bool = False):
        self.only = group
        self.keep_history = history
        self.topics = TopicNames()
        self._kept: list[tuple[float, int, dict]] = []  # a heap, by response time
        self._seen = 0
        self.groups: dict[str, Group] = {}
        self.pending: dict[int, dict[tuple[str, str, int], Commit]] = {}
        self.history: list[Commit] = []
        self.log_end: dict[tuple[str, int], tuple[float, int]] = {}
        self.exchanges = 0

    def exchange(self, record: dict) -> None:
        """Exchanges come in about the order of their responses; they are applied in exactly
        that order through a window of REORDER exchanges (memory stays bounded)."""
        if record.get("type") != "exchange":
            return
        api_key = record.get("api_key")
        if api_key == METADATA:
            self.topics.learn(api_key, record.get("response"))
        elif api_key in _KEPT:
            when = record.get("response_time") or record.get("request_time") or 0.0
            if api_key == FETCH:
                record = _high_watermarks(record)
            elif api_key == PRODUCE:
                record = _produced_ends(record)
            heapq.heappush(self._kept, (when, self._seen, record))
            self._seen += 1
            if len(self._kept) > REORDER:
                self._apply_next()

    def _apply_next(self) -> None:
        when, _, record = heapq.heappop(self._kept)
        self.exchanges += 1
        self._apply(record, when)

    def finish(self) -> GroupsView:
        while self._kept:
            self._apply_next()
        names = self.topics.names
        for group in self.groups.values():
            group.offsets = {(names.get(t, t), p): c for (t, p), c in group.offsets.items()}
            for commit in group.offsets.values():
                commit.topic = names.get(commit.topic, commit.topic)
        for commit in self.history:
            commit.topic = names.get(commit.topic, commit.topic)
        notes = []
        open_commits = sum(len(p) for p in self.pending.values())
        if open_commits:
            notes.append(f"{open_commits} transactional offset commits of producer ids "
                         f"{sorted(self.pending)} were not seen committed or aborted: pending")
        groups = {g: group for g, group in self.groups.items()
                  if self.only is None or g == self.only}
        return GroupsView(groups=groups, history=list(self.history), notes=notes,
                          log_end_offsets={tp: v for tp, (_, v) in self.log_end.items()},
                          topic_names=dict(names))

    # -- one exchange ----------------------------------------------------------------------------

    def _apply(self, record: dict, when: float) -> None:
        api_key = record["api_key"]
        request = record.get("request") or {}
        response = record.get("response")
        if api_key == OFFSET_COMMIT:
            self._commit(record, request, response, when)
        elif api_key == TXN_OFFSET_COMMIT:
            self._commit(record, request, response, when, request.get("producer_id"))
        elif api_key == END_TXN:
            if response is not None and not response.get("error_code"):
                self._end_transaction(request.get("producer_id"), bool(request.get("committed")))
        elif api_key == WRITE_TXN_MARKERS:
            self._markers(request, response, when)
        elif response is None:
            return
        elif api_key == OFFSET_FETCH:
            self._fetched(record, request, response, when)
        elif api_key == OFFSET_DELETE:
            self._offsets_deleted(record, request, response, when)
        elif api_key == DELETE_GROUPS:
            for result in response.get("results") or ():
                if not result.get("error_code") and self._wanted(result.get("group_id")):
                    group = self._group(result["group_id"])
                    group.offsets.clear()
                    group.members.clear()
                    group.deleted, group.state = True, "Dead"
        elif api_key == DESCRIBE_GROUPS:
            for entry in response.get("groups") or ():
                if not entry.get("error_code") and self._wanted(entry.get("group_id")):
                    self._described(responses.classic_group(entry))
        elif api_key == CONSUMER_GROUP_DESCRIBE:
            for entry in response.get("groups") or ():
                if not entry.get("error_code") and self._wanted(entry.get("group_id")):
                    self._described(responses.consumer_group(entry, self.topics.names))
        elif api_key == LIST_GROUPS:
            for entry in response.get("groups") or ():
                if self._wanted(entry.get("group_id")):
                    group = self._group(entry["group_id"])
                    group.state = entry.get("group_state") or group.state
                    group.kind = (entry.get("group_type") or group.kind).lower()
                    group.protocol_type = entry.get("protocol_type")
        elif api_key == LIST_OFFSETS:
            self._listed_offsets(request, response, when)
        elif api_key == PRODUCE:
            for topic, partition, end in response["ends"]:
                entry = topic if isinstance(topic, dict) else {"name": topic}  # a name not UTF-8 is bytes
                self._log_end(topic_of(entry, self.topics.names),
                              partition, end, when)
        elif api_key == FETCH:
            for topic in response.get("responses") or ():
                name = topic_of(topic, self.topics.names)
                for p in topic.get("partitions") or ():
                    if not p.get("error_code") and p.get("high_watermark", -1) >= 0:
                        self._log_end(name, p["partition_index"], p["high_watermark"], when)

    def _commit(self, record, request, response, when, producer_id=None) -> None:
        group_id = request.get("group_id")
        if not self._wanted(group_id):
            return
        errors = {}
        for topic in (response or {}).get("topics") or ():
            name = topic_of(topic, self.topics.names)
            for p in topic.get("partitions") or ():
                errors[(name, p.get("partition_index"))] = p.get("error_code", 0)
        group = self._group(group_id)
        when_ms = round(when * 1000)
        for topic in request.get("topics") or ():
            name = topic_of(topic, self.topics.names)
            for p in topic.get("partitions") or ():
                partition = p.get("partition_index")
                timestamp = p.get("commit_timestamp", -1)
                commit = Commit(group_id, name, partition, p.get("committed_offset"),
                                p.get("committed_leader_epoch", -1), p.get("committed_metadata"),
                                timestamp if timestamp and timestamp > 0 else when_ms,
                                source=record.get("conn"),
                                producer_id=-1 if producer_id is None else producer_id)
                error = errors.get((name, partition))
                if response is None:
                    commit.outcome = UNANSWERED
                elif error is None or error:
                    commit.outcome = REJECTED
                    commit.error = "NO_RESULT" if error is None else error_name(error)
                elif producer_id is None:
                    group.offsets[(name, partition)] = commit
                else:
                    commit.outcome = PENDING
                    self.pending.setdefault(producer_id, {})[(group_id, name, partition)] = commit
                if self.keep_history:
                    self.history.append(commit)

    def _end_transaction(self, producer_id, committed: bool) -> None:
        pending = self.pending.pop(producer_id, None)
        for (group_id, topic, partition), commit in (pending or {}).items():
            if committed:
                commit.outcome = COMMITTED
                self._group(group_id).offsets[(topic, partition)] = commit
            else:
                commit.outcome = ABORTED

    def _marked(self, request: dict, written: dict, when: float) -> None:
        """A COMMIT or ABORT marker written takes one offset of each data partition it went to."""
        for marker in request.get("markers") or ():
            answer = written.get(marker.get("producer_id"))
            for topic in (answer or {}).get("topics") or ():
                name = topic_of(topic, self.topics.names)
                for p in topic.get("partitions") or ():
                    seen = self.log_end.get((name, p.get("partition_index")))
                    if name != OFFSETS_TOPIC and seen is not None and not p.get("error_code"):
                        self._log_end(name, p.get("partition_index"), seen[1] + 1, when)

    def _markers(self, request: dict, response: dict | None, when: float = 0.0) -> None:
        if response is None:
            return
        written = {m.get("producer_id"): m for m in response.get("markers") or ()}
        self._marked(request, written, when)
        for marker in request.get("markers") or ():
            topics = [t for t in marker.get("topics") or () if t.get("name") == OFFSETS_TOPIC]
            answer = written.get(marker.get("producer_id"))
            if not topics or answer is None:
                continue
            ok = all(not p.get("error_code") for t in answer.get("topics") or ()
                     if t.get("name") == OFFSETS_TOPIC for p in t.get("partitions") or ())
            if ok:
                self._end_transaction(marker.get("producer_id"),
                                      bool(marker.get("transaction_result")))

    def _fetched(self, record, request, response, when) -> None:
        requested = request.get("groups")
        for index, (group_id, error, topics) in enumerate(
                responses.fetched_groups(response, request)):
            if error or not self._wanted(group_id):
                continue
            if requested is not None:
                asked = requested[index].get("topics") if index < len(requested) else []
            else:
                asked = request.get("topics")
            found, absent, _ = responses.fetched_offsets(group_id, topics, self.topics.names,
                                                         round(when * 1000), record.get("conn"))
            group = self._group(group_id)
            if asked is None:  # all of the group's offsets: whatever is not listed is gone
                group.offsets.clear()
            for topic, partition in absent:
                group.offsets.pop((topic, partition), None)
            for commit in found:
                group.offsets[(commit.topic, commit.partition)] = commit
                if self.keep_history:
                    self.history.append(commit)

    def _offsets_deleted(self, record, request, response, when) -> None:
        group_id = request.get("group_id")
        if response.get("error_code") or not self._wanted(group_id):
            return
        group = self._group(group_id)
        for topic in response.get("topics") or ():
            name = topic_of(topic, self.topics.names)
            for p in topic.get("partitions") or ():
                if p.get("error_code"):
                    continue
                group.offsets.pop((name, p.get("partition_index")), None)
                if self.keep_history:
                    self.history.append(Commit(group_id, name, p.get("partition_index"), None,
                                               metadata=None, commit_timestamp=round(when * 1000),
                                               source=record.get("conn"), outcome=DELETED))

    def _listed_offsets(self, request, response, when) -> None:
        latest = {(t.get("name"), p.get("partition_index"))
                  for t in request.get("topics") or () for p in t.get("partitions") or ()
                  if p.get("timestamp") == LATEST}
        for topic in response.get("topics") or ():
            for p in topic.get("partitions") or ():
                key = (topic.get("name"), p.get("partition_index"))
                if key not in latest or p.get("error_code"):
                    continue
                offset = p.get("offset")
                if offset is None and p.get("old_style_offsets"):
                    offset = p["old_style_offsets"][0]
                if offset is not None and offset >= 0:
                    self._log_end(key[0], key[1], offset, when)

    # -- helpers ---------------------------------------------------------------------------------

    def _wanted(self, group_id) -> bool:
        return group_id is not None and (self.only is None or group_id == self.only)

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, CLASSIC)
        elif group.deleted:
            group.deleted, group.state = False, None
        return group

    def _described(self, described: Group) -> None:
        group = self._group(described.group_id)
        offsets = group.offsets
        for name in Group.__slots__:
            setattr(group, name, getattr(described, name))
        group.offsets = offsets

    def _log_end(self, topic: str, partition: int, offset: int, when: float) -> None:
        seen = self.log_end.get((topic, partition))
        if seen is None or when >= seen[0]:
            self.log_end[(topic, partition)] = (when, offset)



def _produced_ends(record: dict) -> dict:
    """What the replay reads of a Produce exchange: each accepted partition's new log end, the
    response's base offset plus the records of the request's batches for it."""
    sent = {}
    for topic in (record.get("request") or {}).get("topic_data") or ():
        key = topic.get("name") or topic.get("topic")
        for p in topic.get("partition_data") or ():
            batches = p.get("records") if isinstance(p.get("records"), list) else []
            sent[(key or topic.get("topic_id"), p.get("index"))] = sum(_batch_records(b) for b in batches)
    ends = []
    for topic in (record.get("response") or {}).get("responses") or ():
        key = topic.get("name") or topic.get("topic")
        name = key or {"topic_id": topic.get("topic_id")}
        for p in topic.get("partition_responses") or ():
            count = sent.get((key or topic.get("topic_id"), p.get("index")))
            base = p.get("base_offset")
            if count and not p.get("error_code") and isinstance(base, int) and base >= 0:
                ends.append((name, p.get("index"), base + count))
    return {"api_key": PRODUCE, "response": {"ends": ends} if record.get("response") else None}


def _batch_records(batch) -> int:
    """Offsets a produced batch takes: a v2 batch's last offset delta + 1; a legacy message set's
    entry one (a compressed wrapper's inner messages: their count)."""
    if not isinstance(batch, dict):
        return 0
    delta = batch.get("last_offset_delta")
    if isinstance(delta, int) and delta >= 0:
        return delta + 1
    inner = batch.get("records")
    return len(inner) if isinstance(inner, list) and inner and batch.get("compression") not in (None, "none") else 1


def _high_watermarks(record: dict) -> dict:
    """What the replay reads of a Fetch exchange (not its records): partitions' high watermarks."""
    topics = []
    for topic in (record.get("response") or {}).get("responses") or ():
        slim = {key: topic[key] for key in ("topic", "topic_id", "name") if key in topic}
        slim["partitions"] = [{key: p.get(key) for key in ("partition_index", "error_code",
                                                            "high_watermark")}
                              for p in topic.get("partitions") or ()]
        topics.append(slim)
    return {"api_key": FETCH, "response": {"responses": topics} if record.get("response") else None}
