"""The data source's options (strings, as Spark hands them over) read into what the tasks use:
the decoder's settings, decode's exchange filter, and the planner's. No Spark here.

| option | meaning | default |
|---|---|---|
| path / paths | files, directories, globs (``load(path)`` or ``load([...])``) | (required) |
| table | exchanges, records, files, findings (kinspect doctor's checks, per file), clients (kinspect clients' inventory, per file) | exchanges |
| keylog | a TLS key log file (several: a JSON list of paths) | none |
| ports | Kafka ports besides 9092, comma-separated | none |
| heuristic | "false": decode only the given ports | true |
| show_secrets | "true": SASL secrets not redacted | false |
| schemas | the records table's keys and values framed with a schema id are decoded (key_json, value_json, ...) with the schemas of each capture's own registry records, as decode --json does, and of these sources too: decode's --schemas SOURCE (log dirs, captures, directories of schema files, http(s):// registries), comma-separated or a JSON list; each task opens them, so a cluster's executors must see them | the captures' own |
| schemas_topic | the registry's topic in those sources and in the captures | _schemas |
| raw_values | "true": no schema decoding (the schema columns null), as decode's --raw-values | false |
| api_name, client_id, topic | decode's --api, --client-id (globs), --topic, comma-separated | none |
| errors, min_latency_ms | decode's --errors, --min-latency-ms | none |
| task_mb | capture megabytes per task (small files packed, big ones split) | 256 |
| cores | tasks at once the plan is made for | the session's, at register() |
| rotation | "true": the paths are a rotating writer's files, decoded in name order with connections stitched across neighbours (rotation.py) | false |
| settle_seconds | readStream: the newest file counts complete, as the last one, once unchanged this long | never |
| max_items, max_records, max_batch_bytes, max_ratio, max_file_ratio, max_records_per_byte | decode's bounds for hostile input (kinspect.limits) | decode's |
"""

from __future__ import annotations

import json

from kinspect.decode.filters import ExchangeFilter, resolve_api
from kinspect.limits import DEFAULT_LIMITS, Limits
from kinspect.spark.plan import TARGET_BYTES
from kinspect.spark.rows import TABLES

# option -> (Limits field, smallest value): the bounds of cli/limits.py, by the same names
LIMIT_OPTIONS = {"max_items": ("max_items", 1), "max_records": ("eager_records", 1),
                 "max_batch_bytes": ("max_batch_bytes", 1024), "max_ratio": ("max_ratio", 1),
                 "max_file_ratio": ("max_file_ratio", 1), "max_records_per_byte": ("max_records_per_byte", 0)}
PUBLIC_TABLES = ("exchanges", "records", "files", "findings", "clients")
KNOWN = {"path", "paths", "table", "keylog", "ports", "heuristic", "show_secrets", "api_name", "client_id",
         "topic", "errors", "min_latency_ms", "task_mb", "cores", *LIMIT_OPTIONS,
         "rotation", "settle_seconds", "schemas", "schemas_topic", "raw_values"}


class OptionError(ValueError):
    """An option the data source cannot take: its message names the option and what to give."""


def _whole(options: dict, name: str, least: int, default: int) -> int:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(str(text).strip())
    except ValueError:
        raise OptionError(f"kinspect data source: option {name}={text!r}: give a whole number") from None
    if value < least:
        raise OptionError(f"kinspect data source: option {name}={value}: give at least {least}")
    return value


def _flag(options: dict, name: str, default: bool) -> bool:
    text = options.get(name)
    if text is None:
        return default
    if str(text).strip().lower() in ("true", "1", "yes"):
        return True
    if str(text).strip().lower() in ("false", "0", "no"):
        return False
    raise OptionError(f"kinspect data source: option {name}={text!r}: give true or false")


def _listed(options: dict, name: str) -> list[str]:
    """A comma-separated option (or a JSON list) as its items."""
    text = options.get(name)
    if text is None or not str(text).strip():
        return []
    text = str(text).strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            raise OptionError(f"kinspect data source: option {name}: not a JSON list") from None
        return [str(item) for item in items]
    return [item.strip() for item in text.split(",") if item.strip()]


def check_known(options: dict) -> None:
    unknown = sorted(set(options) - KNOWN)
    if unknown:
        raise OptionError(f"kinspect data source: unknown option {unknown[0]!r}; known: "
                          f"{', '.join(sorted(KNOWN - {'paths'}))}")


def table(options: dict) -> str:
    name = str(options.get("table", "exchanges")).strip().lower()
    if name not in PUBLIC_TABLES:
        raise OptionError(f"kinspect data source: option table={name!r}: give one of {', '.join(PUBLIC_TABLES)}")
    return name


def schema_of(name: str):
    """The Arrow schema of table ``name`` (rows.TABLES: one place for the data source and the Parquet)."""
    return TABLES[name]


def paths(options: dict) -> list[str]:
    """The inputs given to load(): one path, or several (Spark hands a list over as "paths", JSON)."""
    found = _listed(options, "paths") if options.get("paths") else []
    if options.get("path"):
        found.insert(0, str(options["path"]))
    if not found:
        raise OptionError("kinspect data source: no input: give load(PATH) (files, directories or globs)")
    return found


def limits(options: dict) -> Limits:
    given = {field: _whole(options, name, least, getattr(DEFAULT_LIMITS, field))
             for name, (field, least) in LIMIT_OPTIONS.items()}
    return Limits(**given)


def decode_options(options: dict) -> dict:
    """DecodeRun's settings (what cli/spark.py gives the tasks), without the key log."""
    try:
        ports = {int(p) for p in _listed(options, "ports")}
    except ValueError:
        raise OptionError(f"kinspect data source: option ports={options.get('ports')!r}: give port numbers, "
                          f"comma-separated") from None
    if any(not 0 < p < 65536 for p in ports):
        raise OptionError(f"kinspect data source: option ports={options.get('ports')!r}: ports are 1-65535")
    return {"ports": ports | {9092}, "heuristic": _flag(options, "heuristic", True),
            "show_secrets": _flag(options, "show_secrets", False), "limits": limits(options)}


def exchange_filter(options: dict) -> ExchangeFilter | None:
    """decode's filters from the options api_name, client_id, topic, errors, min_latency_ms; None
    when none is given. Applied in the tasks (Spark 4.0's Python data sources take no pushed filters)."""
    try:
        api_keys = [resolve_api(name) for name in _listed(options, "api_name")]
    except ValueError as e:
        raise OptionError(f"kinspect data source: option api_name: {e}") from None
    latency = options.get("min_latency_ms")
    try:
        min_latency = float(latency) if latency is not None else None
    except ValueError:
        raise OptionError(f"kinspect data source: option min_latency_ms={latency!r}: give a number") from None
    keep = ExchangeFilter(api_keys, _listed(options, "client_id"), _listed(options, "topic"),
                          _flag(options, "errors", False), min_latency)
    return keep if keep.active else None


def schemas(options: dict) -> dict:
    """The tasks' schema options (spark/values.py): the sources (none: the captures' own registry
    records alone) and the topic; nothing with raw_values."""
    if _flag(options, "raw_values", False):
        return {}
    topic = str(options.get("schemas_topic") or "_schemas").strip()
    if not topic:
        raise OptionError("kinspect data source: option schemas_topic: give the registry's topic name")
    return {"schemas": _listed(options, "schemas"), "schemas_topic": topic}


def keylog_paths(options: dict) -> list[str]:
    return _listed(options, "keylog") if str(options.get("keylog", "")).strip().startswith("[") else \
        ([str(options["keylog"])] if options.get("keylog") else [])


def task_bytes(options: dict) -> int:
    return _whole(options, "task_mb", 1, TARGET_BYTES >> 20) << 20


def cores(options: dict, default: int) -> int:
    return _whole(options, "cores", 1, default)


def rotation(options: dict) -> bool:
    return _flag(options, "rotation", False)


def settle(options: dict) -> float | None:
    text = options.get("settle_seconds")
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise OptionError(f"kinspect data source: option settle_seconds={text!r}: give a number") from None
    if value < 0:
        raise OptionError(f"kinspect data source: option settle_seconds={value}: give 0 or more")
    return value
