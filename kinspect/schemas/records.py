"""The output contract: a record's key and value decoded in place, with their schema beside.

    apply_record(record, schemas)   # record: {"key", "value", "headers", ...}, changed in place

A decoded value replaces "value" (or "key"), and "value_schema" ("key_schema") says which schema:
{"id", "format", "subject", "message" for Protobuf}. A framed value that stays bytes (unknown id,
or a payload that does not read) keeps "value" as bytes, with the schema object saying why
("found": false, or "error" and "offset"). A value no framing marks is left alone. Field values
whose name says they are secret (wire.secrets.secret_name: *.password, *secret*, sasl.jaas.config
..., and any name ending in "password") are redacted unless show_secrets.
"""

from __future__ import annotations

from kinspect.schemas.resolver import RAW
from kinspect.schemas.secret_fields import secret_field
from kinspect.wire import secrets

MAX_REDACT_DEPTH = 200


def apply_record(record: dict, schemas, show_secrets: bool = False) -> bool:
    """True when a key or value was framed (decoded or not)."""
    framed = False
    headers = record.get("headers")
    for field, is_key in (("key", True), ("value", False)):
        value = record.get(field)
        if value is None or isinstance(value, str):
            continue
        found = schemas.decode(value, headers, is_key)
        if found is None:
            continue
        framed = True
        decoded, about = found
        if decoded is not RAW:
            record[field] = (decoded if show_secrets or not schemas.may_hold_secrets(about)
                             else redact(decoded))
        record[f"{field}_schema"] = about
    return framed


def redact(value, depth: int = 0):
    """Secret-named fields of a decoded value, redacted in place (the value returned)."""
    if depth > MAX_REDACT_DEPTH:
        return value
    if isinstance(value, dict):
        for name, item in value.items():
            if secret_field(name) and item is not None and not isinstance(item, (dict, list)):
                value[name] = secrets.whole(item if isinstance(item, (str, bytes)) else str(item))
            else:
                redact(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            redact(item, depth + 1)
    return value
