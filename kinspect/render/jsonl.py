"""JSON Lines: one object per line. Bytes become text when they are valid UTF-8, else {"b64": ...}."""

from __future__ import annotations

import base64
import json


def _default(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(raw).decode("ascii")}
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


_encoder = json.JSONEncoder(default=_default, ensure_ascii=False, separators=(",", ":"),
                            allow_nan=False)


def _finite(value):
    if isinstance(value, float) and value != value or value in (float("inf"), float("-inf")):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(record) -> str:
    try:
        return _encoder.encode(record)
    except ValueError:  # NaN or infinity in a float64 field: JSON has no spelling for them
        return _encoder.encode(_finite(record))


def plain(value):
    """The JSON-able form of a decoded value (bytes converted), for renderers that need objects."""
    return json.loads(dumps(value))
