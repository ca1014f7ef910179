"""Schema-aware keys and values for the records table (the options ``schemas`` and
``schemas_topic``; `kinspect spark --schemas`): per capture file, the schemas of the sources and
of the capture's own registry records, as decode --json finds them, and each record's columns.

    values = FileValues.open(["/var/lib/kafka"], "_schemas", path, run_options)
    values.exchange(record)                  # before its records rows: the registry's records learnt
    columns = values.columns(key, value, headers)   # key_json, key_schema_id, ... (rows.RECORDS)

A key or value decoded by its schema gets its decoded value as JSON text (the text decode --json
writes for it, secrets redacted the same way), its schema's id, format and subject; one framed
with a schema id that did not decode keeps only its id (and format, when the schema is known); a
key or value no framing marks gets nulls. No Spark here.
"""

from __future__ import annotations

import os

from kinspect.render.jsonl import dumps
from kinspect.schemas.capture import SchemaRecords, read_capture
from kinspect.schemas.load import open_sources
from kinspect.schemas.records import apply_record
from kinspect.schemas.sources import DEFAULT_TOPIC, feed_records
from kinspect.schemas.stage import mentions
from kinspect.spark.rows import SCHEMA_COLUMNS

OPTIONS = ("schemas", "schemas_topic")  # the DecodeRun options' entries that are this module's
NULLS = dict.fromkeys(SCHEMA_COLUMNS)


def popped(options: dict) -> tuple[list[str] | None, str]:
    """(the schema sources, or None when not asked for; the registry's topic), taken out of a
    task's DecodeRun options."""
    sources = options.pop("schemas", None)
    topic = options.pop("schemas_topic", None) or DEFAULT_TOPIC
    return (None if sources is None else list(sources)), topic


class FileValues:
    """The schemas one capture file's records are read with."""

    def __init__(self, schemas, topic: str, learn: bool, show_secrets: bool):
        self.schemas, self.topic, self.learn, self.show_secrets = schemas, topic, learn, show_secrets

    @classmethod
    def open(cls, sources: list[str], topic: str, path, run_options: dict) -> FileValues:
        """The sources' schemas (unreadable ones are left out: the driver said so when it
        checked them) and, for a local capture file that names the registry's topic, its own
        registry records read first, as decode does (others learn them as they come)."""
        schemas, _problems = open_sources(sources, topic, limits=run_options.get("limits"))
        learn = True
        if isinstance(path, str) and os.path.isfile(path) and mentions(path, topic, run_options.get("limits")):
            from kinspect.decode.pipeline import CaptureUnreadable
            try:
                read_capture(path, schemas.store, topic, **run_options)
                learn = False
            except CaptureUnreadable:
                pass  # the decode itself says why
        return cls(schemas, topic, learn, bool(run_options.get("show_secrets")))

    def exchange(self, record: dict) -> None:
        if self.learn and record.get("type") == "exchange":
            collected = SchemaRecords(self.topic)
            collected.exchange(record)
            if len(collected):
                feed_records(self.schemas.store, collected.records())

    def columns(self, key, value, headers) -> dict:
        """The records row's schema columns of one record (key and value as their bytes)."""
        columns = dict(NULLS)
        if not len(self.schemas.store) and self.schemas.fallback is None:
            return columns
        shown = {"key": key, "value": value, "headers": headers}
        apply_record(shown, self.schemas, self.show_secrets)
        for field in ("key", "value"):
            about = shown.get(f"{field}_schema")
            if about is None:
                continue
            columns[f"{field}_schema_id"] = about.get("id")
            columns[f"{field}_schema_format"] = about.get("format")
            columns[f"{field}_schema_subject"] = about.get("subject")
            if about.get("found") is not False and "error" not in about:
                columns[f"{field}_json"] = dumps(shown[field])
        return columns
