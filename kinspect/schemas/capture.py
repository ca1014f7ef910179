"""`_schemas` records in a capture: Produce requests (offsets from their responses) and Fetch
responses, topic ids named as decode names them.

    collected = SchemaRecords("_schemas")
    for exchange in finished_exchanges:
        collected.exchange(exchange)          # cheap for every other API and topic
    feed_records(store, collected.records())  # (topic, key, value, offset), in offset order

read_capture does both over a whole capture file (kinspect.decode.pipeline's DecodeRun).
"""

from __future__ import annotations

from kinspect.schemas.registry import SchemaStore
from kinspect.schemas.sources import DEFAULT_TOPIC, _records, feed_records

PRODUCE, FETCH = 0, 1
MAX_KEPT = 1_000_000  # records of the topic held until the replay (a registry holds far fewer)


class SchemaRecords:
    def __init__(self, topic: str = DEFAULT_TOPIC):
        self.topic = topic
        self._by_offset: dict[tuple[int, int], tuple[bytes, bytes | None]] = {}
        self._unplaced: list[tuple[int, bytes, bytes | None]] = []  # Produce with no response
        self.dropped = 0

    def exchange(self, record: dict) -> None:
        if record.get("type") != "exchange":
            return
        api = record.get("api_key")
        if api == PRODUCE:
            self._produce(record.get("request"), record.get("response"))
        elif api == FETCH:
            self._fetch(record.get("response"))

    def _topics(self, entries):
        for entry in entries or ():
            if isinstance(entry, dict) and (entry.get("name") or entry.get("topic")) == self.topic:
                yield entry

    def _produce(self, request, response) -> None:
        if not isinstance(request, dict):
            return
        bases = {}
        if isinstance(response, dict):
            for entry in self._topics(response.get("responses")):
                for part in entry.get("partition_responses") or entry.get("partitions") or ():
                    if isinstance(part, dict) and part.get("error_code") == 0:
                        bases[part.get("index", part.get("partition"))] = part.get("base_offset")
        for entry in self._topics(request.get("topic_data")):
            for part in entry.get("partition_data") or ():
                if not isinstance(part, dict):
                    continue
                index = part.get("index", part.get("partition"))
                base = bases.get(index)
                for batch in part.get("records") or ():
                    self._batch(index, batch, base)

    def _fetch(self, response) -> None:
        if not isinstance(response, dict):
            return
        for entry in self._topics(response.get("responses")):
            for part in entry.get("partitions") or ():
                if isinstance(part, dict):
                    for batch in part.get("records") or ():
                        self._batch(part.get("partition_index", part.get("partition")), batch, 0)

    def _batch(self, partition, batch, base) -> None:
        if not isinstance(batch, dict) or batch.get("is_control"):
            return
        for record in _records(batch.get("records")):
            if len(self._by_offset) + len(self._unplaced) >= MAX_KEPT:
                self.dropped += 1
                continue
            key, value = record.get("key"), record.get("value")
            offset = record.get("offset")
            if base is None or not isinstance(offset, int):
                self._unplaced.append((len(self._unplaced), key, value))
            else:
                self._by_offset[(partition if isinstance(partition, int) else -1, base + offset)] = (key, value)

    def records(self):
        """(topic, key, value, offset): placed records in (partition, offset) order, then the
        records of Produce requests no response placed, in the order sent."""
        for (_, offset), (key, value) in sorted(self._by_offset.items(), key=lambda item: item[0]):
            yield self.topic, key, value, offset
        for _, key, value in self._unplaced:
            yield self.topic, key, value, None

    def __len__(self) -> int:
        return len(self._by_offset) + len(self._unplaced)


def read_capture(path: str, store: SchemaStore, topic: str = DEFAULT_TOPIC, **run_options) -> int:
    """Replays the `topic` records of a capture file; returns how many were found."""
    from kinspect.decode.pipeline import DecodeRun  # the capture path: imported only when one is read
    collected = SchemaRecords(topic)
    for record in DecodeRun(path, **run_options).records(pack_records=True):  # other topics: bytes
        collected.exchange(record)
    feed_records(store, collected.records())
    return len(collected)
