"""Generate kinspect/wire/_schemas.py from Apache Kafka's JSON message definitions.

    python tools/gen_schemas.py [SPECS_DIR]      (default: tests/data/thirdparty/kafka-message-specs)

Reads kafka-3.9.0/clients and kafka-4.2-snapshot/clients. For each (api key, kind, version)
the 4.2 definition wins when 4.2's validVersions holds the version, else 3.9's. Each message
becomes a tuple of segments, one per source, each pruned to the versions it serves:

    (first_version, last_version, flexible_from | None, fields, common_structs, source)

A field is a dict holding only the keys that matter: name, type, versions, nullableVersions,
tag, taggedVersions, flexibleVersions, fields, default (only when it is not the type's zero),
entityType. Version strings keep Kafka's notation ("0+", "3-7", "none"). "about" texts,
mapKey, ignorable and zeroCopy are dropped. Output is deterministic: same specs, same bytes.

It also writes kinspect/storage/_record_schemas.py: the records Kafka's coordinators write to
their internal topics (group-coordinator/ for __consumer_offsets, transaction-coordinator/ for
__transaction_state), the consumer protocol's subscription and assignment and the KRaft
control records (clients/), in the same
segment notation, keyed by struct name, plus the record-type tables that map a key's int16
type to its key and value structs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPECS = REPO / "tests" / "data" / "thirdparty" / "kafka-message-specs"
OUTPUT = REPO / "kinspect" / "wire" / "_schemas.py"
RECORDS_OUTPUT = REPO / "kinspect" / "storage" / "_record_schemas.py"

OLD, NEW = "kafka-3.9.0", "kafka-4.2-snapshot"
PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "uuid", "records"}
KEPT_KEYS = ("name", "type", "versions", "nullableVersions", "tag", "taggedVersions",
             "flexibleVersions", "fields", "default", "entityType")


def load(path: Path) -> dict:
    text = "\n".join(line for line in path.read_text().splitlines()
                     if not line.lstrip().startswith("//"))
    return json.loads(text)


def parse_range(spec: str, top: int = 1 << 15) -> tuple[int, int] | None:
    """Kafka's version notation → inclusive (low, high), None for "none"."""
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), top
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def overlaps(spec: str | None, low: int, high: int) -> bool:
    r = parse_range(spec) if spec else None
    return r is not None and r[0] <= high and low <= r[1]


_ZERO = object()  # typed_default's answer when the default is the type's implicit zero


def typed_default(field: dict):
    """The field's default as a Python value, or a sentinel when it is the type's zero."""
    raw = field.get("default")
    if raw is None:
        return _ZERO
    kind = field["type"]
    if isinstance(raw, str) and raw == "null":
        return None
    if kind.startswith("[]") or kind in ("bytes", "records", "uuid"):
        return _ZERO if raw in ("", "0") else raw
    if kind == "bool":
        value = raw if isinstance(raw, bool) else raw.strip() == "true"
        return value if value else _ZERO
    if kind == "string":
        return raw if raw != "" else _ZERO
    if kind == "float64":
        value = float(raw)
        return value if value else _ZERO
    value = int(raw, 0) if isinstance(raw, str) else int(raw)
    return value if value else _ZERO



def prune(fields: list[dict], low: int, high: int, used_structs: set[str]) -> tuple[dict, ...]:
    kept = []
    for f in fields:
        if not overlaps(f["versions"], low, high):
            continue
        out = {}
        for key in KEPT_KEYS:
            if key == "fields":
                if "fields" in f:
                    out["fields"] = prune(f["fields"], low, high, used_structs)
            elif key == "default":
                value = typed_default(f)
                if value is not _ZERO:
                    out["default"] = value
            elif key in ("nullableVersions", "taggedVersions") and key in f:
                if overlaps(f[key], low, high):
                    out[key] = f[key]
            elif key in f:
                out[key] = f[key]
        if "taggedVersions" in f and "taggedVersions" not in out:
            out.pop("tag", None)
        base = f["type"].removeprefix("[]")
        if base not in PRIMITIVES and "fields" not in f:
            used_structs.add(base)
        kept.append(out)
    return tuple(kept)


def segment(spec: dict, low: int, high: int, source: str) -> tuple:
    used: set[str] = set()
    fields = prune(spec["fields"], low, high, used)
    commons_by_name = {c["name"]: c for c in spec.get("commonStructs", ())}
    commons = {}
    pending = sorted(used)
    while pending:  # common structs may refer to other common structs
        name = pending.pop()
        if name in commons or name not in commons_by_name:
            continue
        inner: set[str] = set()
        commons[name] = prune(commons_by_name[name]["fields"], low, high, inner)
        pending.extend(sorted(inner - commons.keys()))
    flex = parse_range(spec.get("flexibleVersions", "none"))
    flexible_from = flex[0] if flex else None
    return (low, high, flexible_from, fields, dict(sorted(commons.items())), source)


def messages(specs: Path, line: str) -> dict[tuple[int, str], dict]:
    found = {}
    for path in sorted((specs / line / "clients").glob("*.json")):
        spec = load(path)
        if spec.get("type") in ("request", "response") and "apiKey" in spec:
            found[(spec["apiKey"], spec["type"])] = spec
    return found


def merge(old: dict | None, new: dict | None) -> tuple:
    segments = []
    new_range = parse_range(new["validVersions"]) if new else None
    old_range = parse_range(old["validVersions"]) if old else None
    if old_range:
        low, high = old_range
        if new_range:  # 3.9 serves only what 4.2 does not; 4.2 ranges are contiguous
            below = (low, min(high, new_range[0] - 1))
            above = (max(low, new_range[1] + 1), high)
            for lo, hi in (below, above):
                if lo <= hi:
                    segments.append(segment(old, lo, hi, "3.9"))
        else:
            segments.append(segment(old, low, high, "3.9"))
    if new_range:
        segments.append(segment(new, *new_range, "4.2"))
    return tuple(sorted(segments, key=lambda s: s[0]))


def api_name(spec: dict) -> str:
    return re.sub(r"(Request|Response)$", "", spec["name"])


def build(specs: Path) -> dict:
    old, new = messages(specs, OLD), messages(specs, NEW)
    table = {}
    for key in sorted({k for k, _ in old} | {k for k, _ in new}):
        newest = new.get((key, "request")) or old[(key, "request")]
        table[key] = (api_name(newest),
                      merge(old.get((key, "request")), new.get((key, "request"))),
                      merge(old.get((key, "response")), new.get((key, "response"))))
    return table


def commit_of(specs: Path, line: str) -> str:
    readme = (specs / "README.md").read_text()
    match = re.search(rf"{re.escape(line)}/.*?commit\s+([0-9a-f]{{40}})", readme, re.S)
    return match.group(1) if match else "unknown"


def render(specs: Path) -> str:
    table = build(specs)
    head = f'''# GENERATED by tools/gen_schemas.py — do not edit; rerun the generator instead.
# Generated from Apache Kafka's message definitions (clients/*Request.json, *Response.json),
# Apache License 2.0, Copyright The Apache Software Foundation:
#   3.9: apache/kafka 3.9.0-rc3, commit {commit_of(specs, OLD)}
#   4.2: apache/kafka 4.2.0-SNAPSHOT, commit {commit_of(specs, NEW)}
# For each version the 4.2 definition wins when 4.2 defines it; else 3.9's.
#
# SCHEMAS[api_key] = (api_name, request_segments, response_segments)
# segment = (first_version, last_version, flexible_from | None, fields, common_structs, source)
# field = dict with name, type, versions[, nullableVersions, tag, taggedVersions,
#         flexibleVersions, fields, default, entityType] in Kafka's version notation.
# fmt: off
'''
    lines = ["SCHEMAS = {"]
    for key, (name, requests, responses) in table.items():
        lines.append(f"    {key}: ({name!r},")
        for kind, segments in (("requests", requests), ("responses", responses)):
            lines.append(f"        (  # {kind}")
            for first, last, flexible_from, fields, commons, source in segments:
                lines.append(f"            ({first}, {last}, {flexible_from!r}, (  # from {source}")
                emit_fields(fields, 16, lines)
                if not commons:
                    lines.append(f"            ), {{}}, {source!r}),")
                    continue
                lines.append("            ), {")
                for struct, struct_fields in commons.items():
                    lines.append(f"                {struct!r}: (")
                    emit_fields(struct_fields, 20, lines)
                    lines.append("                ),")
                lines.append(f"            }}, {source!r}),")
            lines.append("        ),")
        lines.append("    ),")
    lines.append("}")
    return head + "\n".join(lines) + "\n"


def emit_fields(fields: tuple[dict, ...], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for f in fields:
        flat = ", ".join(f"{k!r}: {v!r}" for k, v in f.items() if k != "fields")
        if "fields" in f:
            lines.append(f"{pad}{{{flat}, 'fields': (")
            emit_fields(f["fields"], indent + 4, lines)
            lines.append(f"{pad})}},")
        else:
            lines.append(f"{pad}{{{flat}}},")


# -- coordinator records (kinspect/storage/_record_schemas.py) --------------------------------

CLIENT_STRUCTS = ("ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
                  "LeaderChangeMessage", "SnapshotHeaderRecord", "SnapshotFooterRecord",
                  "KRaftVersionRecord", "VotersRecord")


def with_versions(fields: list[dict]) -> list[dict]:
    """Kafka reads a field without "versions" as present in its taggedVersions."""
    out = []
    for f in fields:
        f = dict(f)
        if "versions" not in f and "taggedVersions" in f:
            f["versions"] = f["taggedVersions"]
        if "fields" in f:
            f["fields"] = with_versions(f["fields"])
        out.append(f)
    return out


def record_specs(specs: Path, line: str, folder: str) -> dict[str, dict]:
    found = {}
    directory = specs / line / folder
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else ():
        spec = load(path)
        spec["fields"] = with_versions(spec["fields"])
        for common in spec.get("commonStructs", ()):
            common["fields"] = with_versions(common["fields"])
        found[spec["name"]] = spec
    return found


def record_types(specs: dict[str, dict], new: bool) -> dict[int, tuple[str, int, str]]:
    """type → (key struct, key version, value struct). 4.x keys carry the type as apiKey and
    are version 0; 3.9 keys were "data" whose version was the record type."""
    table = {}
    for name, spec in specs.items():
        if not name.endswith("Key"):
            continue
        value = name[:-3] + "Value"
        if new:
            table[spec["apiKey"]] = (name, 0, value)
        else:
            low, high = parse_range(spec["validVersions"])
            for record_type in range(low, high + 1):
                table[record_type] = (name, record_type, value)
    return table


def build_records(specs: Path) -> tuple[dict, dict, dict]:
    old_group = record_specs(specs, OLD, "group-coordinator")
    new_group = record_specs(specs, NEW, "group-coordinator")
    group_types = {**record_types(old_group, False), **record_types(new_group, True)}
    # the legacy offset commit (type 0) has the offset commit's value in every version
    if 0 in group_types and 1 in group_types:
        group_types[0] = (group_types[0][0], group_types[0][1], group_types[1][2])
    transaction = record_specs(specs, NEW, "transaction-coordinator")
    transaction_types = record_types(transaction, True)
    old_all = {**old_group, **{n: s for n, s in client_structs(specs, OLD).items()}}
    new_all = {**new_group, **transaction, **{n: s for n, s in client_structs(specs, NEW).items()}}
    used = {name for types in (group_types, transaction_types)
            for key, _, value in types.values() for name in (key, value)} | set(CLIENT_STRUCTS)
    # a key is read at the version its type table gives: 4.x keys need no 3.9 segment
    for name in new_group:
        if name.endswith("Key"):
            old_all.pop(name, None)
    structs = {name: merge(old_all.get(name), new_all.get(name))
               for name in sorted(used) if name in old_all or name in new_all}
    return structs, dict(sorted(group_types.items())), dict(sorted(transaction_types.items()))


def client_structs(specs: Path, line: str) -> dict[str, dict]:
    return {name: load(specs / line / "clients" / f"{name}.json") for name in CLIENT_STRUCTS
            if (specs / line / "clients" / f"{name}.json").exists()}


def render_records(specs: Path) -> str:
    structs, group_types, transaction_types = build_records(specs)
    head = f'''# GENERATED by tools/gen_schemas.py — do not edit; rerun the generator instead.
# Generated from Apache Kafka's coordinator record definitions (group-coordinator/*.json,
# transaction-coordinator/*.json), the consumer protocol and the KRaft control records
# (clients/ConsumerProtocol*.json, LeaderChangeMessage.json, Snapshot*Record.json, ...),
# Apache License 2.0, Copyright The Apache Software Foundation:
#   3.9: apache/kafka 3.9.0-rc3, commit {commit_of(specs, OLD)}
#   4.2: apache/kafka 4.2.0-SNAPSHOT, commit {commit_of(specs, NEW)}
# For each version the 4.2 definition wins when 4.2 defines it; else 3.9's.
#
# STRUCTS[name] = segments, each (first_version, last_version, flexible_from | None, fields,
#                 common_structs, source), fields as in kinspect/wire/_schemas.py.
# GROUP_RECORD_TYPES / TRANSACTION_RECORD_TYPES[type] = (key struct, key version, value struct):
#   the int16 at the start of a record key picks the type.
# fmt: off
'''
    lines = ["STRUCTS = {"]
    for name, segments in structs.items():
        lines.append(f"    {name!r}: (")
        for first, last, flexible_from, fields, commons, source in segments:
            lines.append(f"        ({first}, {last}, {flexible_from!r}, (  # from {source}")
            emit_fields(fields, 12, lines)
            if not commons:
                lines.append(f"        ), {{}}, {source!r}),")
                continue
            lines.append("        ), {")
            for struct, struct_fields in commons.items():
                lines.append(f"            {struct!r}: (")
                emit_fields(struct_fields, 16, lines)
                lines.append("            ),")
            lines.append(f"        }}, {source!r}),")
        lines.append("    ),")
    lines.append("}")
    for title, types in (("GROUP_RECORD_TYPES", group_types),
                         ("TRANSACTION_RECORD_TYPES", transaction_types)):
        lines.append(f"{title} = {{")
        lines += [f"    {key}: {entry!r}," for key, entry in types.items()]
        lines.append("}")
    return head + "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    specs = Path(argv[1]) if len(argv) > 1 else DEFAULT_SPECS
    if not (specs / OLD / "clients").is_dir() or not (specs / NEW / "clients").is_dir():
        print(f"gen_schemas: {specs} lacks {OLD}/clients or {NEW}/clients", file=sys.stderr)
        return 2
    for output, text in ((OUTPUT, render(specs)), (RECORDS_OUTPUT, render_records(specs))):
        output.write_text(text)
        print(f"wrote {output.relative_to(REPO)} ({output.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
