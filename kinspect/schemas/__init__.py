"""Schema-aware keys and values: Avro, Protobuf and JSON Schema, decoded offline from the schemas
Kafka already holds (the registry's `_schemas` topic), from files, or from a registry over HTTP.

The integration API (what dump uses, and what decode's finishing step calls):

    from kinspect.schemas.load import open_sources
    schemas, problems = open_sources(["/var/lib/kafka"], topic="_schemas")   # --schemas SOURCE...

    found = schemas.decode(value, headers, is_key=False)    # one record's key or value
    if found is None:             # not framed: the value stays as it is
        ...
    else:
        decoded, about = found    # about: {"id", "format": avro|protobuf|json, "subject",
                                  #         "message" (Protobuf's full name), "guid", "from"}
        if decoded is RAW:        # kinspect.schemas.resolver.RAW: the value stays bytes;
            ...                   # about has "found": False (unknown id), or "error" and "offset"
    schemas.problems()            # notices: unknown ids (one each), schemas that do not compile,
                                  # registries that did not answer

The `_schemas` records of the input itself reach the same store: a log dir's through
open_sources(log_dirs=...), a capture's through capture.SchemaRecords (fed finished exchanges)
and sources.feed_records(schemas.store, records) with (topic, key, value, offset) tuples.
apply_record(record, schemas) (records.py) turns a record dict's key and value into the output
contract: the decoded value in place, and a sibling "key_schema"/"value_schema".

Modules: framing (where the id is), registry (the `_schemas` replay), sources and capture (where
schemas come from), load (--schemas), avro / protobuf (the decoders, bounded on hostile input),
resolver (Schemas: lookup, compile cache per run, decode), records (the output contract).
"""
