"""How dump events show keys, values and headers: --decode auto, text, hex or json.

auto: an internal topic's records as their decoded structs; otherwise a JSON object or array
when the bytes are one, text when they are UTF-8, else {"b64": ...}. text: UTF-8 with
replacement characters; hex: lower-case hex; json: parsed JSON, else text.

A key or value decoded with its schema (kinspect.schemas: the record has "key_schema" or
"value_schema") is shown decoded in every mode, the schema object beside it; one that stayed
bytes (unknown id, a payload that does not read) is shown by the mode, the object saying why.
"""

from __future__ import annotations

import base64
import json

MODES = ("auto", "text", "hex", "json")


def show(value: bytes | str | None, mode: str):
    if value is None or isinstance(value, str):  # text: a redacted secret, "<redacted N bytes>"
        return value
    raw = bytes(value)
    if mode == "hex":
        return raw.hex()
    if mode == "text":
        return raw.decode("utf-8", "replace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace") if mode == "json" else {
            "b64": base64.b64encode(raw).decode("ascii")}
    if mode == "json" or text[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def record_view(record: dict, data: bool, mode: str) -> dict:
    """A record of a batch event as dump shows it (JSON-able but for bytes in decoded structs,
    which the JSON Lines writer turns into text or {"b64"})."""
    out = {"offset": record["offset"], "timestamp": record["timestamp"],
           "key_size": record["key_size"], "value_size": record["value_size"]}
    if "sequence" in record:
        out["sequence"] = record["sequence"]
    if "crc" in record:
        out["crc"], out["crc_valid"] = record["crc"], record.get("crc_valid")
    if not data:
        out["header_keys"] = [header["key"] for header in record["headers"]]
        return out
    decoded = record.get("decoded")
    if decoded is not None and mode == "auto":
        if "record_type" in decoded:
            out.update(decoded)
        else:
            out["key"] = show(record["key"], mode)
            out["value"] = decoded
    else:
        out["key"], out["value"] = _shown(record, "key", mode), _shown(record, "value", mode)
        for field in ("key_schema", "value_schema"):
            if field in record:
                out[field] = record[field]
    out["headers"] = [{"key": h["key"], "value": show(h["value"], mode)}
                      for h in record["headers"]]
    return out


def decoded_with_schema(about) -> bool:
    return about is not None and "error" not in about and about.get("found", True)


def _shown(record: dict, field: str, mode: str):
    if decoded_with_schema(record.get(field + "_schema")):
        return record[field]
    return show(record[field], mode)
