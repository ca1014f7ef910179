"""--schemas http://...: a real HTTP server on loopback serving the registry's documented
endpoints (GET /schemas/ids/{id}[?format=serialized], /schemas/ids/{id}/versions,
/subjects/{subject}/versions/{version}, /schemas/guids/{guid}/ids) from the recorded _schemas;
and one that never answers."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kinspect.schemas.registry import SchemaStore
from kinspect.schemas.sources import read_log_dir
from tests.unit.schemas.fixtures import LOGS, dumped_records, expected, json_lines, kinspect



def _serialized(store: SchemaStore, schema) -> str:
    """What a registry answers for format=serialized: the FileDescriptorProto, base64."""
    from kinspect.schemas.protobuf import compile_files
    texts = {ref["name"]: store.version(ref["subject"], ref["version"]).text for ref in schema.references}
    name = "main.proto"
    files = compile_files(name, {**texts, name: schema.text})
    main = next(f for f in files if f.name == name)
    main.name = f"{schema.subject}.proto"
    return base64.b64encode(main.SerializeToString()).decode()


class Registry:
    def __init__(self):
        self.store = SchemaStore()
        read_log_dir(LOGS, self.store)
        self.asked: list[str] = []
        store, asked = self.store, self.asked

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                asked.append(self.path)
                url = urllib.parse.urlsplit(self.path)
                parts = [urllib.parse.unquote(p) for p in url.path.strip("/").split("/")]
                query = dict(urllib.parse.parse_qsl(url.query))
                body = None
                if parts[:2] == ["schemas", "guids"] and parts[3:] == ["ids"]:
                    guid = bytes.fromhex(parts[2].replace("-", ""))
                    held = store.by_guid(guid)
                    body = [{"context": ".", "id": held.id}] if held is not None else None
                elif parts[:2] == ["schemas", "ids"]:
                    held = store.by_id(int(parts[2]))
                    if held is not None and len(parts) == 4:
                        body = [{"subject": held.subject, "version": held.version}]
                    elif held is not None:
                        body = self._schema(held, query)
                elif parts[0] == "subjects" and parts[2] == "versions":
                    held = store.version(parts[1], -1 if parts[3] == "latest" else int(parts[3]))
                    if held is not None:
                        body = {"subject": held.subject, "version": held.version, "id": held.id,
                                **self._schema(held, query)}
                data = json.dumps(body or {"error_code": 40403, "message": "Schema not found"}).encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _schema(self, held, query):
                out = {"schema": held.text}
                if held.schema_type == "PROTOBUF" and query.get("format") == "serialized":
                    out["schema"] = _serialized(store, held)
                if held.schema_type != "AVRO":
                    out["schemaType"] = held.schema_type
                if held.references:
                    out["references"] = held.references
                return out

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _data_only(tmp_path):
    for source in LOGS.iterdir():
        if not source.name.startswith("_schemas"):
            shutil.copytree(source, tmp_path / source.name)
    return tmp_path


def test_values_decode_with_schemas_asked_of_a_registry_over_http(tmp_path):
    registry = Registry()
    try:
        done = kinspect("dump", "--json", "--data", "--show-secrets", "--schemas", registry.url,
                        _data_only(tmp_path))
    finally:
        registry.close()
    assert done.returncode == 0, done.stderr
    records = dumped_records(json_lines(done.stdout))
    for where, entry in expected().items():
        if entry["format"] is None:
            continue
        got = records[where]
        assert "error" not in got["value_schema"] and got["value"] == entry["value"], (where, got["value_schema"])
        assert got["value_schema"]["subject"] == registry.store.by_id(got["value_schema"]["id"]).subject
    # each id asked once; Protobuf also as format=serialized; references by subject and version
    ids = [p for p in registry.asked if p.startswith("/schemas/ids/") and "/versions" not in p and "?" not in p]
    assert len(ids) == len(set(ids)) == 5  # 2, 3, 4, 5, 7 (1 and 6 only referenced)
    assert any("format=serialized" in p for p in registry.asked)
    assert "/subjects/lab.common.Address/versions/1" in registry.asked


def test_a_registry_that_never_answers_times_out_once_and_decoding_goes_on(tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # accepts (the kernel does), never answers
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        started = time.monotonic()
        done = kinspect("dump", "--json", "--data", "--schemas", url, _data_only(tmp_path), timeout=60)
        took = time.monotonic() - started
    finally:
        silent.close()
    assert done.returncode == 0, done.stderr
    notices = [n for n in json_lines(done.stdout) if n.get("type") == "notice"]
    assert [n["check"] for n in notices if n["check"] == "schema_registry"] == ["schema_registry"]
    assert "timed out" in done.stderr and "asked nothing more this run" in done.stderr
    records = dumped_records(json_lines(done.stdout))
    assert records[("lab-avro", 0)]["value_schema"] == {"id": 3, "found": False}
    assert records[("lab-plain", 0)]["value"] == "plain text"
    assert took < 40  # one 5 s timeout, not one per value
