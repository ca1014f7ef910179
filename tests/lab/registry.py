"""A lab schema registry: Confluent's REST API, its state kept in Kafka's `_schemas` topic.

No real registry runs here (Confluent's schema-registry is not on Maven Central; Karapace is
not on PyPI; Apicurio's Confluent-compatible API keeps its state in its own journal topic, not
in the KafkaStore format). So the lab serves the endpoints confluent-kafka's serializers and
kinspect's HTTP source use, and writes every change with a real producer to `_schemas` in the
KafkaStore record format, as Confluent's schema-registry writes it (checked against its sources:
core/.../storage/SchemaKey.java, SchemaValue.java, ConfigKey.java, DeleteSubjectKey.java,
DeleteSubjectValue.java, NoopKey.java, KafkaSchemaRegistry.java):
- key {"keytype":"SCHEMA","subject":S,"version":V,"magic":1} (that field order), value
  {"subject","version","id","schemaType" (not for Avro),"references" (when any),"schema",
  "deleted"}: Jackson's NON_EMPTY drops null and empty fields;
- key {"keytype":"CONFIG","magic":0} value {"compatibilityLevel":"BACKWARD"} (global config);
- key {"keytype":"NOOP","magic":0}, a null value (the store's start marker);
- DELETE /subjects/S: key {"keytype":"DELETE_SUBJECT","subject":S,"magic":0} value
  {"subject":S,"version":<latest>}, then each version rewritten with "deleted":true.
The GUID a V1 frame carries is Confluent's MD5 of the schema (schema text, then each reference's
name, subject and 4-byte version; MD5.java, Schema.updateHash). Protobuf schemas arrive from
confluent-kafka's serializer as base64 FileDescriptorProtos; the registry stores the .proto text
of that file (given to it by name, the files the lab compiled), as Confluent stores the text.

    with LabRegistry(broker.bootstrap, proto_sources={"lab_orders.proto": text}) as registry:
        client = SchemaRegistryClient({"url": registry.url})
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import confluent_kafka as ck

TOPIC = "_schemas"


def guid(schema: str, references: list[dict]) -> str:
    digest = hashlib.md5(schema.encode())
    for ref in references:
        digest.update(ref["name"].encode())
        digest.update(ref["subject"].encode())
        digest.update(ref["version"].to_bytes(4, "big"))
    h = digest.hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class LabRegistry:
    def __init__(self, bootstrap: str, *, proto_sources: dict[str, str] | None = None,
                 topic: str = TOPIC):
        self.bootstrap, self.topic = bootstrap, topic
        self.proto_sources = proto_sources or {}
        self.schemas: dict[int, dict] = {}                 # id -> {"schema", "schemaType", "references", "original"}
        self.subjects: dict[str, dict[int, dict]] = {}     # subject -> version -> {"id", "deleted"}
        self.lock = threading.Lock()
        self.written: list[tuple[dict, dict | None]] = []  # every record sent to `_schemas`
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                     "client.id": "lab-schema-registry", "linger.ms": 0,
                                     "enable.idempotence": False})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "LabRegistry":
        self._write({"keytype": "NOOP", "magic": 0}, None)
        self._write({"keytype": "CONFIG", "magic": 0}, {"compatibilityLevel": "BACKWARD"})
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.producer.flush(30)

    # -- the store -------------------------------------------------------------------------

    def _write(self, key: dict, value: dict | None) -> None:
        errors = []
        self.producer.produce(self.topic, key=json.dumps(key, separators=(",", ":")).encode(),
                              value=None if value is None else json.dumps(value, separators=(",", ":")).encode(),
                              partition=0, on_delivery=lambda err, msg: err and errors.append(err))
        self.producer.flush(30)
        if errors:
            raise RuntimeError(f"_schemas write failed: {errors}")
        self.written.append((key, value))

    def _text(self, body: dict) -> tuple[str, str]:
        kind = body.get("schemaType") or "AVRO"
        schema = body["schema"]
        if kind == "PROTOBUF":
            from google.protobuf import descriptor_pb2
            try:
                name = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema)).name
            except Exception:
                name = None
            if name is not None:
                if name not in self.proto_sources:
                    raise KeyError(f"no .proto text for {name}")
                schema = self.proto_sources[name]
        return kind, schema

    def register(self, subject: str, body: dict) -> dict:
        with self.lock:
            kind, text = self._text(body)
            refs = [{"name": r["name"], "subject": r["subject"], "version": r["version"]}
                    for r in body.get("references") or ()]
            for schema_id, held in self.schemas.items():
                if held["schema"] == text and held["schemaType"] == kind and held["references"] == refs:
                    break
            else:
                schema_id = max(self.schemas, default=0) + 1
                self.schemas[schema_id] = {"schema": text, "schemaType": kind, "references": refs,
                                           "original": body["schema"]}
            versions = self.subjects.setdefault(subject, {})
            for version, entry in versions.items():
                if entry["id"] == schema_id and not entry["deleted"]:
                    return self._registered(subject, version, schema_id)
            version = max(versions, default=0) + 1
            versions[version] = {"id": schema_id, "deleted": False}
            self._write(*self._schema_record(subject, version))
            return self._registered(subject, version, schema_id)

    def _schema_record(self, subject: str, version: int) -> tuple[dict, dict]:
        entry = self.subjects[subject][version]
        held = self.schemas[entry["id"]]
        value = {"subject": subject, "version": version, "id": entry["id"]}
        if held["schemaType"] != "AVRO":
            value["schemaType"] = held["schemaType"]
        if held["references"]:
            value["references"] = held["references"]
        value["schema"] = held["schema"]
        value["deleted"] = entry["deleted"]
        return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}, value

    def _registered(self, subject, version, schema_id) -> dict:
        held = self.schemas[schema_id]
        return {"subject": subject, "version": version, "id": schema_id,
                "guid": guid(held["schema"], held["references"])}

    def delete_subject(self, subject: str) -> list[int]:
        with self.lock:
            versions = self.subjects.get(subject) or {}
            live = [v for v, e in versions.items() if not e["deleted"]]
            if not live:
                return []
            self._write({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0},
                        {"subject": subject, "version": max(live)})
            for version in live:
                versions[version]["deleted"] = True
                self._write(*self._schema_record(subject, version))
            return live

    def lookup(self, subject: str, body: dict) -> dict | None:
        with self.lock:
            kind, text = self._text(body)
            for version, entry in (self.subjects.get(subject) or {}).items():
                held = self.schemas[entry["id"]]
                if held["schema"] == text and not entry["deleted"]:
                    return {**self._registered(subject, version, entry["id"]), "schema": body["schema"],
                            **({"schemaType": kind} if kind != "AVRO" else {}),
                            "references": held["references"]}
            return None

    def answer(self, schema_id: int, fmt: str | None) -> dict | None:
        held = self.schemas.get(schema_id)
        if held is None:
            return None
        text = held["schema"]
        if fmt == "serialized" and held["schemaType"] == "PROTOBUF" and held["original"] != text:
            text = held["original"]
        out = {"schema": text}
        if held["schemaType"] != "AVRO":
            out["schemaType"] = held["schemaType"]
        if held["references"]:
            out["references"] = held["references"]
        return out

    def version(self, subject: str, version: str, fmt: str | None) -> dict | None:
        versions = self.subjects.get(subject) or {}
        live = [v for v, e in versions.items() if not e["deleted"]]
        number = max(live, default=None) if version == "latest" else int(version)
        if number not in versions:
            return None
        entry = versions[number]
        return {"subject": subject, "version": number, "id": entry["id"],
                "guid": guid(self.schemas[entry["id"]]["schema"], self.schemas[entry["id"]]["references"]),
                **self.answer(entry["id"], fmt)}


def _handler(registry: LabRegistry):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _send(self, code: int, body) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self):
            url = urllib.parse.urlsplit(self.path)
            parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
            return parts, dict(urllib.parse.parse_qsl(url.query))

        def do_GET(self):
            parts, query = self._route()
            found = None
            if parts[:2] == ["schemas", "ids"] and len(parts) == 3 and parts[2].isdigit():
                found = registry.answer(int(parts[2]), query.get("format"))
            elif parts[:2] == ["schemas", "ids"] and len(parts) == 4 and parts[3] == "versions":
                found = [{"subject": s, "version": v} for s, vs in registry.subjects.items()
                         for v, e in vs.items() if e["id"] == int(parts[2])] or None
            elif parts[0] == "subjects" and len(parts) == 4 and parts[2] == "versions":
                found = registry.version(parts[1], parts[3], query.get("format"))
            if found is None:
                self._send(404, {"error_code": 40403, "message": "Schema not found"})
            else:
                self._send(200, found)

        def do_POST(self):
            parts, query = self._route()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            try:
                if parts[0] == "subjects" and len(parts) == 3 and parts[2] == "versions":
                    self._send(200, registry.register(parts[1], body))
                    return
                if parts[0] == "subjects" and len(parts) == 2:
                    found = registry.lookup(parts[1], body)
                    if found is None:
                        self._send(404, {"error_code": 40403, "message": "Schema not found"})
                    else:
                        self._send(200, found)
                    return
            except KeyError as e:
                self._send(422, {"error_code": 42201, "message": str(e)})
                return
            self._send(404, {"error_code": 404, "message": "not served by the lab registry"})

        def do_DELETE(self):
            parts, _ = self._route()
            if parts[0] == "subjects" and len(parts) == 2:
                self._send(200, registry.delete_subject(parts[1]))
            else:
                self._send(404, {"error_code": 404, "message": "not served by the lab registry"})

    return Handler
