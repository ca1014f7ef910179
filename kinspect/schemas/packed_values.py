"""Framed keys and values of packed batches (records/packed.py) decoded straight into their JSON
text, without Python objects: the fast way of decode --json.

    values = PackedValues(stage)      # one per schema stage (schemas/stage.py)
    packed.values = values            # the batch's to_json now writes them decoded

``native.v2records.to_json`` frames each key and value in C; for one framed as Confluent's V0 in
its payload it looks the id up in ``table`` ({id: (reader, the schema object's JSON text)},
filled by ``Schemas.json_entry`` as ids are met) and has the schema's reader write the value's
JSON text in place of its bytes, byte for byte what the Python way (schemas/records.py, then
render/jsonl.py) writes. Anything else (an id in a header, a GUID, an unknown id, a payload the
reader does not take, fields to redact) makes to_json give None for the batch; its records are
then decoded as dicts by ``apply``, the Python way, which counts them, reports what is wrong
and gives the notices.
"""

from __future__ import annotations

from kinspect import native
from kinspect.schemas.records import apply_record

MAX_IDS = 4096  # ids kept in the table (the resolver keeps its own bounded caches)


class PackedValues:
    __slots__ = ("stage", "table", "_generation")

    def __init__(self, stage):
        self.stage = stage
        self.table: dict = {}
        self._generation = -1

    def to_json(self, data: bytes, start: int, stop: int, base_offset: int, base_timestamp: int,
                fixed_timestamp: int | None) -> bytes | None:
        schemas = self.stage.schemas
        if self._generation != schemas.store.changes:  # schemas learned since: ids may resolve now
            self.table.clear()
            self._generation = schemas.store.changes
        got = native.v2records.to_json(data, start, stop, base_offset, base_timestamp, fixed_timestamp,
                                       self.table, self._resolve)
        if got is None:
            return None
        text, decoded = got
        schemas.decoded += decoded
        return text

    def apply(self, records: list) -> None:
        """The records' framed keys and values decoded in place, the Python way."""
        self.stage.records(records)

    def _resolve(self, ident: int):
        entry = self.stage.schemas.json_entry(ident, self.stage.show_secrets)
        if len(self.table) < MAX_IDS:
            self.table[ident] = entry
        return entry
