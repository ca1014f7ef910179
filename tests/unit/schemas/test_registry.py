"""The _schemas replay, as Confluent's KafkaStoreMessageHandler/InMemoryCache and Karapace's
schema_reader apply it."""

from __future__ import annotations

import base64
import hashlib
import json

from kinspect.schemas.registry import SchemaStore, guid_of


def _key(subject, version):
    return json.dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}).encode()


def _value(subject, version, schema_id, schema='"string"', **more):
    return json.dumps({"subject": subject, "version": version, "id": schema_id, "schema": schema,
                       "deleted": False, **more}).encode()


def test_schema_type_absent_is_avro_and_last_write_wins():
    store = SchemaStore()
    store.record(_key("s", 1), _value("s", 1, 1, '"string"'), 0)
    store.record(_key("s", 1), _value("s", 1, 1, '"string"', deleted=True), 1)
    held = store.by_id(1)
    assert (held.schema_type, held.format, held.deleted) == ("AVRO", "avro", True)


def test_soft_deleted_ids_resolve_and_a_tombstone_hard_deletes():
    store = SchemaStore()
    store.record(_key("s", 1), _value("s", 1, 4), 0)
    store.record(json.dumps({"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0}).encode(),
                 json.dumps({"subject": "s", "version": 1}).encode(), 1)
    assert store.by_id(4).deleted
    store.record(_key("s", 1), None, 2)
    assert store.by_id(4) is None


def test_an_id_shared_by_subjects_resolves_until_its_last_holder_goes():
    store = SchemaStore()
    store.record(_key("a", 1), _value("a", 1, 9), 0)
    store.record(_key("b", 3), _value("b", 3, 9), 1)
    store.record(_key("a", 1), None, 2)
    assert store.by_id(9).subject == "b"


def test_clear_subject_drops_only_soft_deleted_versions():
    store = SchemaStore()
    store.record(_key("s", 1), _value("s", 1, 1, '"int"', deleted=True), 0)
    store.record(_key("s", 2), _value("s", 2, 2, '"long"'), 1)
    store.record(json.dumps({"keytype": "CLEAR_SUBJECT", "subject": "s", "magic": 0}).encode(),
                 json.dumps({"subject": "s"}).encode(), 2)
    assert store.by_id(1) is None and store.by_id(2) is not None


def test_a_duplicate_id_with_another_schema_is_refused_as_the_registry_does():
    store = SchemaStore()
    store.record(_key("a", 1), _value("a", 1, 5, '"int"'), 0)
    store.record(_key("b", 1), _value("b", 1, 5, '"long"'), 1)
    assert store.by_id(5).text == '"int"' and store.counts["refused"] == 1


def test_other_keytypes_are_counted_and_junk_set_aside():
    store = SchemaStore()
    for keytype in ("CONFIG", "MODE", "NOOP", "CONTEXT", "ASSOC"):
        store.record(json.dumps({"keytype": keytype, "magic": 0}).encode(), b'{"x": 1}', 0)
    store.record(b"not json", b"{}", 1)
    store.record(b'{"no": "keytype"}', b"{}", 2)
    store.record(b'{"keytype": "SCHEMA"}', b"[1]", 3)
    store.record(None, b"{}", 4)
    assert len(store) == 0
    assert store.counts == {"CONFIG": 1, "MODE": 1, "NOOP": 1, "CONTEXT": 1, "ASSOC": 1,
                            "not_json": 1, "no_keytype": 1, "bad_value": 1, "not_registry": 1}


def test_contexts_keep_their_own_ids():
    store = SchemaStore()
    store.record(_key(":.tenant:s", 1), _value(":.tenant:s", 1, 1, '"int"'), 0)
    store.record(_key("s", 1), _value("s", 1, 1, '"long"'), 1)
    assert store.by_id(1).text == '"long"'
    assert store.by_id(1, ".tenant").text == '"int"'


def test_guid_is_the_md5_of_the_schema_and_its_references():
    refs = [{"name": "a.proto", "subject": "a", "version": 2}]
    digest = hashlib.md5(b"text" + b"a.proto" + b"a" + (2).to_bytes(4, "big")).digest()
    assert guid_of({"schema": "text", "references": refs}) == digest
    stored = base64.b64encode(b"\x01" * 16).decode()
    assert guid_of({"schema": "text", "md5": stored}) == b"\x01" * 16
    assert guid_of({"schema": "text", "metadata": {"tags": {}}}) is None


class _NoWalk(dict):
    """_ids that refuses to be walked whole: by_id must look its id up, not scan every id."""

    def __iter__(self):
        raise AssertionError("by_id walked every id")

    def keys(self):
        raise AssertionError("by_id walked every id")


def test_an_id_is_found_without_walking_every_id_and_contexts_follow_deletes():
    store = SchemaStore()
    for n in range(1, 50):
        store.record(_key(f"s{n}", 1), _value(f"s{n}", 1, n, f'{{"type": "long", "n": {n}}}'), n)
    store.record(_key(":.tenant:t", 1), _value(":.tenant:t", 1, 99, '"int"'), 50)
    store._ids = _NoWalk(store._ids)
    assert store.by_id(7).subject == "s7" and store.by_id(99).text == '"int"' and store.by_id(1000) is None
    store.record(_key(":.tenant:t", 1), None, 51)  # hard delete: the id is gone from its context
    assert store.by_id(99) is None
    store.record(_key(":.tenant:t", 1), _value(":.tenant:t", 1, 99, '"int"'), 52)
    store.record(_key(":.tenant:t", 1), _value(":.tenant:t", 1, 99, '"int"'), 53)  # rewritten as it was
    assert store.by_id(99).text == '"int"'
