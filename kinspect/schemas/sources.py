"""Where schemas come from: `_schemas` partitions in a log dir, directories of schema files, a
registry over HTTP (captures: kinspect.schemas.capture). Every source fills one SchemaStore.

    store, notes = SchemaStore(), []
    read_log_dir(Path("/var/lib/kafka"), store, topic="_schemas")     # or a _schemas-0 directory
    read_schema_files(Path("schemas/"), store)
    registry = HttpRegistry("http://registry:8081")                   # asked per unknown id
"""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path

from kinspect.problems import WARNING, Problem
from kinspect.records.stream import RecordStream
from kinspect.schemas.registry import SchemaStore, StoredSchema, guid_of
from kinspect.storage import files
from kinspect.storage.mapped import mapped
from kinspect.storage.segment import walk_segment

DEFAULT_TOPIC = "_schemas"
EXTENSIONS = {".avsc": "AVRO", ".proto": "PROTOBUF", ".json": "JSON"}
MAX_SCHEMA_FILE = 4 << 20
MAX_SCHEMA_FILES = 10_000
HTTP_TIMEOUT = 5.0
MAX_HTTP_ANSWER = 8 << 20
_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)


class SourceError(Exception):
    """A source that cannot be read at all (missing, unreadable, of no known kind)."""


# -- log dirs ----------------------------------------------------------------------------------

def schema_partitions(path: Path, topic: str = DEFAULT_TOPIC) -> list[Path]:
    """The `topic`-N directories of a log dir, or the directory itself when it is one."""
    own = files.describe(path / "x")
    if own.topic == topic and own.directory_state is None:
        return [path]
    found = []
    try:
        entries = sorted(path.iterdir())
    except OSError as e:
        raise SourceError(f"{path}: {e.strerror or e}") from None
    for entry in entries:
        info = files.describe(entry / "x")
        if info.topic == topic and info.directory_state is None and entry.is_dir():
            found.append(entry)
    return found


def segments(partition_dir: Path) -> list[Path]:
    logs = []
    for entry in partition_dir.iterdir():
        info = files.describe(entry)
        if info.kind == "log" and info.base_offset is not None and not info.renamed:
            logs.append((info.base_offset, entry))
    return [p for _, p in sorted(logs)]


def read_log_dir(path: Path, store: SchemaStore, topic: str = DEFAULT_TOPIC,
                 limits=None, seen: set | None = None) -> int:
    """Replays every `topic`-N partition found (but those in seen, which it adds to); returns
    how many partitions were found."""
    partitions = schema_partitions(path, topic)
    seen = set() if seen is None else seen
    for partition in partitions:
        real = partition.resolve()
        if real in seen:
            continue
        seen.add(real)
        for segment in segments(partition):
            read_segment(segment, store, limits)
    return len(partitions)


def read_segment(path: Path, store: SchemaStore, limits=None) -> None:
    with mapped(path) as buf:
        for kind, item, _ in walk_segment(buf, str(path), **({"max_output": limits} if limits else {})):
            if kind == "batch" and not item.get("is_control"):
                for record in _records(item.get("records")):
                    store.record(record.get("key"), record.get("value"), record.get("offset"))


def _records(records):
    if records is None:
        return
    if isinstance(records, RecordStream):
        for chunk in records.chunks():
            yield from chunk
    else:
        yield from records


def feed_records(store: SchemaStore, records) -> None:
    """Records already decoded elsewhere (a capture's Produce requests and Fetch responses of
    the `_schemas` topic): (topic, key, value, offset) tuples, replayed in the order given."""
    for _, key, value, offset in records:
        store.record(key, value, offset)


# -- directories of schema files ---------------------------------------------------------------

def read_schema_files(path: Path, store: SchemaStore) -> int:
    """Files named by id (42.avsc, 7.proto, 9.json) become those ids; files named otherwise
    (common.proto, com.acme.Address.avsc) are what id-named schemas refer to: a .proto's imports
    by file name, an .avsc's named types (every other .avsc of the directory, in name order)."""
    found: dict[str, tuple[str, str]] = {}
    entries = sorted(p for p in path.rglob("*") if p.suffix in EXTENSIONS)
    for entry in entries[:MAX_SCHEMA_FILES]:
        if not entry.is_file():
            continue
        try:
            if entry.stat().st_size > MAX_SCHEMA_FILE:
                continue
            text = entry.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError:
            continue
        found[entry.relative_to(path).as_posix()] = (EXTENSIONS[entry.suffix], text)
    by_subject = {}
    for name, (kind, text) in found.items():
        if not Path(name).stem.isdigit():
            schema = StoredSchema(-1, name, 1, kind, text)
            store.versions[(name, 1)] = schema
            by_subject[name] = schema
    count = 0
    for name, (kind, text) in found.items():
        stem = Path(name).stem
        if not stem.isdigit():
            continue
        if kind == "PROTOBUF":
            refs = [{"name": dep, "subject": dep, "version": 1}
                    for dep in _IMPORT.findall(text) if dep in by_subject]
        elif kind == "AVRO":
            refs = [{"name": s, "subject": s, "version": 1}
                    for s, held in sorted(by_subject.items()) if held.schema_type == "AVRO"]
        else:
            refs = []
        store.add(StoredSchema(int(stem), name, 1, kind, text, refs))
        count += 1
    return count


# -- a registry over HTTP ----------------------------------------------------------------------

class HttpRegistry:
    """GET /schemas/ids/{id} (and /versions, for the subject), a V1 frame's GUID by
    /schemas/guids/{guid}/ids, the references by /subjects/{subject}/versions/{version};
    Protobuf asked with format=serialized (a
    FileDescriptorProto, no protoc needed for it). A registry that times out or cannot be
    reached is asked nothing more this run (one notice); decoding goes on without it."""

    def __init__(self, base: str, timeout: float = HTTP_TIMEOUT):
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.down: str | None = None
        self.notices: list[Problem] = []
        self.asked = 0

    def __call__(self, schema_id: int, store: SchemaStore | None = None) -> StoredSchema | None:
        if self.down is not None:
            return None
        answer = self._get(f"/schemas/ids/{schema_id}")
        if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
            return None
        schema_type = answer.get("schemaType") or "AVRO"
        text = answer["schema"]
        if schema_type == "PROTOBUF":
            serialized = self._get(f"/schemas/ids/{schema_id}?format=serialized")
            if isinstance(serialized, dict) and isinstance(serialized.get("schema"), str):
                text = serialized["schema"]
        versions = self._get(f"/schemas/ids/{schema_id}/versions")
        subject, version = f"id-{schema_id}", 0
        if isinstance(versions, list) and versions and isinstance(versions[0], dict):
            subject = str(versions[0].get("subject", subject))
            version = versions[0].get("version", 0) if isinstance(versions[0].get("version"), int) else 0
        references = [r for r in answer.get("references") or () if isinstance(r, dict)]
        if store is not None:
            self._references(references, store, 0)
        return StoredSchema(schema_id, subject, version, schema_type, text, references,
                            guid=guid_of({"schema": answer["schema"], "references": references}))

    def by_guid(self, guid: bytes, store: SchemaStore | None = None) -> StoredSchema | None:
        """GET /schemas/guids/{guid} and /schemas/guids/{guid}/ids (V1 frames)."""
        if self.down is not None:
            return None
        h = guid.hex()
        text = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        ids = self._get(f"/schemas/guids/{text}/ids")
        found = [entry.get("id") for entry in ids or () if isinstance(entry, dict)
                 and entry.get("context", ".") in (".", "") and isinstance(entry.get("id"), int)]
        if not found:
            return None
        schema = self(found[0], store)
        if schema is not None:
            schema.guid = guid
        return schema

    def _references(self, references: list, store: SchemaStore, depth: int) -> None:
        for ref in references:
            subject, version = ref.get("subject"), ref.get("version")
            if (not isinstance(subject, str) or not isinstance(version, int) or depth > 32
                    or store.version(subject, version) is not None or self.down is not None):
                continue
            quoted = urllib.parse.quote(subject, safe="")
            answer = self._get(f"/subjects/{quoted}/versions/{'latest' if version == -1 else version}")
            if not isinstance(answer, dict) or not isinstance(answer.get("schema"), str):
                continue
            kind = answer.get("schemaType") or "AVRO"
            text = answer["schema"]
            if kind == "PROTOBUF":
                serialized = self._get(f"/subjects/{quoted}/versions/{answer.get('version', version)}"
                                       f"?format=serialized")
                if isinstance(serialized, dict) and isinstance(serialized.get("schema"), str):
                    text = serialized["schema"]
            inner = [r for r in answer.get("references") or () if isinstance(r, dict)]
            held = StoredSchema(answer.get("id", -1) if isinstance(answer.get("id"), int) else -1,
                                subject, answer.get("version", version) if isinstance(
                                    answer.get("version"), int) else version, kind, text, inner)
            store.versions[(subject, held.version)] = held
            if version == -1:
                store.versions[(subject, -1)] = held
            self._references(inner, store, depth + 1)

    def _get(self, path: str):
        import socket  # here, not at the top: urllib.request, http and ssl are a tenth of decode's start-up
        import urllib.error
        import urllib.request

        self.asked += 1
        request = urllib.request.Request(self.base + path, headers={
            "Accept": "application/vnd.schemaregistry.v1+json, application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read(MAX_HTTP_ANSWER + 1)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            return self._fail(f"HTTP {e.code} for {path}")
        except (urllib.error.URLError, socket.timeout, TimeoutError, OSError, ValueError) as e:
            reason = getattr(e, "reason", e)
            return self._fail(f"{type(reason).__name__}: {reason}" if not isinstance(reason, str)
                              else reason)
        if len(body) > MAX_HTTP_ANSWER:
            return self._fail(f"an answer longer than {MAX_HTTP_ANSWER} bytes for {path}")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            return self._fail(f"an answer that is not JSON for {path}")

    def _fail(self, why: str):
        self.down = why
        self.notices.append(Problem(f"schema registry {self.base}: {why}; it is asked nothing "
                                    f"more this run, and values it would have decoded stay bytes",
                                    "", None, WARNING, "schema_registry"))
        return None
