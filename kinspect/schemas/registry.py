"""The registry's state, replayed from its `_schemas` topic as the registry replays it.

    store = SchemaStore()
    store.record(key_bytes, value_bytes_or_None, offset)   # in offset order, any source
    schema = store.by_id(7)                                # a StoredSchema, or None

Keys are JSON with a ``keytype`` (Confluent's SchemaRegistryKeyType: SCHEMA, CONFIG, MODE, NOOP,
DELETE_SUBJECT, CLEAR_SUBJECT, CONTEXT, ASSOC). Only SCHEMA, DELETE_SUBJECT and CLEAR_SUBJECT
change which ids resolve; the others are counted. The rules, from Confluent's schema-registry
(core/.../storage/KafkaStoreMessageHandler.java, InMemoryCache.java, SchemaValue.java, MD5.java)
and Karapace (src/karapace/core/schema_reader.py):
- last write wins per key; a null value is a hard delete of that key (a SCHEMA tombstone
  removes that subject-version, and its id stops resolving once no subject-version holds it);
- a value with "deleted": true is a soft delete: the id still resolves (old data carries it);
- DELETE_SUBJECT {"subject", "version"} soft-deletes versions 1..version of the subject;
- CLEAR_SUBJECT removes the subject's soft-deleted versions (as their tombstones would);
- a SCHEMA value whose id is already held by a different schema text is refused (the registry
  logs "Found a schema with duplicate ID" and keeps the first);
- "schemaType" absent means AVRO; "references" are [{"name", "subject", "version"}], version -1
  meaning the subject's latest;
- ids live per context: a subject ":.ctx:name" belongs to context ".ctx", others to the default;
- the GUID of V1 framing is the MD5 of the schema: the value's "md5" (base64) when present, else
  MD5(schema text, then each reference's name, subject and 4-byte version) (Schema.updateHash;
  a value with metadata or a ruleSet and no md5 gets no GUID here).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

DEFAULT_CONTEXT = "."
FORMATS = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}
LATEST = -1
MAX_KEY = 1 << 16       # a key or value longer than this is not a registry record
MAX_VALUE = 16 << 20


@dataclass(slots=True)
class StoredSchema:
    id: int
    subject: str
    version: int
    schema_type: str          # AVRO, PROTOBUF or JSON
    text: str
    references: list = field(default_factory=list)   # [{"name", "subject", "version"}]
    deleted: bool = False
    context: str = DEFAULT_CONTEXT
    guid: bytes | None = None

    @property
    def format(self) -> str:
        return FORMATS.get(self.schema_type, self.schema_type.lower())


def context_of(subject: str) -> str:
    """":.ctx:name" belongs to context ".ctx" (QualifiedSubject); anything else to the default."""
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1:subject.index(":", 2)]
    return DEFAULT_CONTEXT


def guid_of(value: dict) -> bytes | None:
    md5 = value.get("md5")
    if isinstance(md5, str):
        try:
            raw = base64.b64decode(md5, validate=True)
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return raw
    if value.get("metadata") or value.get("ruleSet"):
        return None
    import hashlib  # here: importing it loads OpenSSL, 11M instructions of every decode's start-up

    digest = hashlib.md5(str(value.get("schema", "")).encode("utf-8", "surrogatepass"))
    for ref in value.get("references") or ():
        if not isinstance(ref, dict):
            continue
        for part in ("name", "subject"):
            if isinstance(ref.get(part), str):
                digest.update(ref[part].encode("utf-8", "surrogatepass"))
        if isinstance(ref.get("version"), int):
            digest.update((ref["version"] & 0xFFFFFFFF).to_bytes(4, "big"))
    return digest.digest()


class SchemaStore:
    """The replayed state, and counts of what the replay met (for the notices)."""

    def __init__(self):
        self.versions: dict[tuple[str, int], StoredSchema] = {}
        self._ids: dict[tuple[str, int], dict[tuple[str, int], StoredSchema]] = {}
        self._contexts: dict[int, set[str]] = {}  # id -> the contexts holding it (_ids' keys, by id)
        self._guids: dict[bytes, StoredSchema] = {}
        self.counts: dict[str, int] = {}
        self.refused: list[str] = []   # why records were set aside (kept short)
        self.changes = 0               # bumped by every change of what an id or GUID resolves to

    # -- reading ---------------------------------------------------------------------------

    def by_id(self, schema_id: int, context: str | None = None) -> StoredSchema | None:
        """The schema of an id; the default context first, then any other."""
        contexts = [context] if context is not None else [DEFAULT_CONTEXT]
        if context is None:  # the id's own contexts: walking every id's would make n lookups n² steps
            contexts += sorted(ctx for ctx in self._contexts.get(schema_id, ()) if ctx != DEFAULT_CONTEXT)
        for ctx in contexts:
            holders = self._ids.get((ctx, schema_id))
            if holders:
                live = [s for s in holders.values() if not s.deleted]
                return min(live or holders.values(), key=lambda s: (s.subject, s.version))
        return None

    def by_guid(self, guid: bytes) -> StoredSchema | None:
        return self._guids.get(guid)

    def version(self, subject: str, version: int) -> StoredSchema | None:
        if version == LATEST:
            live = [s for (subj, _), s in self.versions.items() if subj == subject and not s.deleted]
            return max(live, key=lambda s: s.version) if live else None
        return self.versions.get((subject, version))

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[int]:
        return sorted({schema_id for _, schema_id in self._ids})

    # -- replay ----------------------------------------------------------------------------

    def add(self, schema: StoredSchema) -> None:
        """A schema known from elsewhere (a file, a registry's answer): as a SCHEMA record."""
        self._put(schema)

    def record(self, key, value, offset: int | None = None) -> None:
        """One `_schemas` record, in offset order. Records that are not the registry's are
        counted and set aside, never raised."""
        if key is None or len(key) > MAX_KEY or (value is not None and len(value) > MAX_VALUE):
            self._count("not_registry")
            return
        try:
            key_obj = json.loads(bytes(key))
            value_obj = None if value is None or len(value) == 0 else json.loads(bytes(value))
        except (ValueError, UnicodeDecodeError):
            self._count("not_json")
            return
        if not isinstance(key_obj, dict) or not isinstance(key_obj.get("keytype"), str):
            self._count("no_keytype")
            return
        if value_obj is not None and not isinstance(value_obj, dict):
            self._count("bad_value")
            return
        keytype = key_obj["keytype"]
        self._count(keytype)
        handler = _HANDLERS.get(keytype)
        if handler is not None:
            handler(self, key_obj, value_obj, offset)

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _refuse(self, why: str) -> None:
        self._count("refused")
        if len(self.refused) < 20:
            self.refused.append(why)

    def _schema(self, key: dict, value: dict | None, offset) -> None:
        subject, version = key.get("subject"), key.get("version")
        if not isinstance(subject, str) or not isinstance(version, int):
            self._refuse(f"SCHEMA key without subject and version at offset {offset}")
            return
        if value is None:
            self._drop(subject, version)
            return
        schema_id, text = value.get("id"), value.get("schema")
        if not isinstance(schema_id, int) or not isinstance(text, str):
            self._refuse(f"SCHEMA value without id or schema at offset {offset}")
            return
        schema_type = value.get("schemaType") or "AVRO"
        references = [r for r in value.get("references") or () if isinstance(r, dict)]
        self._put(StoredSchema(schema_id, subject, version, str(schema_type), text, references,
                               bool(value.get("deleted", False)), context_of(subject),
                               guid_of(value)), offset)

    def _put(self, schema: StoredSchema, offset=None) -> None:
        key = (schema.context, schema.id)
        holders = self._ids.setdefault(key, {})
        for other in holders.values():
            if other.text != schema.text and (other.subject, other.version) != (schema.subject, schema.version):
                self._refuse(f"id {schema.id} already holds another schema (offset {offset}): "
                             f"the registry keeps the first")
                return
        self._drop(schema.subject, schema.version)
        self.changes += 1
        self.versions[(schema.subject, schema.version)] = schema
        self._ids.setdefault(key, {})[(schema.subject, schema.version)] = schema
        self._contexts.setdefault(schema.id, set()).add(schema.context)
        if schema.guid is not None:
            self._guids[schema.guid] = schema

    def _drop(self, subject: str, version: int) -> None:
        old = self.versions.pop((subject, version), None)
        if old is None:
            return
        self.changes += 1
        key = (old.context, old.id)
        holders = self._ids.get(key, {})
        holders.pop((subject, version), None)
        if not holders:
            self._ids.pop(key, None)
            contexts = self._contexts.get(old.id)
            if contexts is not None:
                contexts.discard(old.context)
                if not contexts:
                    del self._contexts[old.id]
            if old.guid is not None and self._guids.get(old.guid) is old:
                del self._guids[old.guid]

    def _delete_subject(self, key: dict, value: dict | None, offset) -> None:
        if value is None:  # "ignore non-schema tombstone"
            return
        subject, upto = value.get("subject", key.get("subject")), value.get("version")
        if not isinstance(subject, str) or not isinstance(upto, int):
            self._refuse(f"DELETE_SUBJECT without subject and version at offset {offset}")
            return
        for (subj, version), schema in self.versions.items():
            if subj == subject and version <= upto:
                schema.deleted = True
        self.changes += 1

    def _clear_subject(self, key: dict, value: dict | None, offset) -> None:
        if value is None:
            return
        subject = value.get("subject", key.get("subject"))
        for subj, version in [k for k, s in self.versions.items() if k[0] == subject and s.deleted]:
            self._drop(subj, version)


_HANDLERS = {"SCHEMA": SchemaStore._schema, "DELETE_SUBJECT": SchemaStore._delete_subject,
             "CLEAR_SUBJECT": SchemaStore._clear_subject}
