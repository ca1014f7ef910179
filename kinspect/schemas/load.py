"""--schemas SOURCE, each kind recognised, all into one Schemas.

    schemas, problems = open_sources(["/var/lib/kafka", "http://registry:8081"], topic="_schemas")
"""

from __future__ import annotations

from pathlib import Path

from kinspect.problems import ERROR, Problem
from kinspect.schemas.registry import SchemaStore
from kinspect.schemas.resolver import Schemas
from kinspect.schemas.sources import (DEFAULT_TOPIC, EXTENSIONS, HttpRegistry, SourceError,
                                      read_log_dir, read_schema_files, schema_partitions)

CAPTURE_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d",
                  b"\x0a\x0d\x0d\x0a", b"\x1f\x8b")


class Registries:
    """Several HTTP registries, asked in the order given."""

    def __init__(self, registries: list[HttpRegistry]):
        self.registries = registries

    def __call__(self, schema_id: int, store: SchemaStore):
        for registry in self.registries:
            found = registry(schema_id, store)
            if found is not None:
                return found
        return None

    def by_guid(self, guid: bytes, store: SchemaStore):
        for registry in self.registries:
            found = registry.by_guid(guid, store)
            if found is not None:
                return found
        return None

    @property
    def notices(self) -> list[Problem]:
        return [n for r in self.registries for n in r.notices]


def open_sources(sources, topic: str = DEFAULT_TOPIC, *, log_dirs=(), limits=None,
                 capture_options: dict | None = None) -> tuple[Schemas, list[Problem]]:
    """sources: the --schemas values; log_dirs: directories being dumped, searched for `topic`
    partitions silently. Problems: sources that could not be read (the rest are used)."""
    store = SchemaStore()
    looked_in: list[str] = []
    problems: list[Problem] = []
    registries: list[HttpRegistry] = []
    seen: set = set()
    for path in dict.fromkeys(Path(p) for p in log_dirs):
        try:
            if path.is_dir() and read_log_dir(path, store, topic, limits, seen):
                looked_in.append(f"{topic} in {path}")
        except (SourceError, OSError):
            pass
    for source in sources:
        try:
            described = _read_one(str(source), store, topic, limits, registries, capture_options or {},
                                  seen)
        except (SourceError, OSError) as e:
            problems.append(Problem(f"--schemas {source}: {getattr(e, 'strerror', None) or e}",
                                    str(source), None, ERROR, "schema_source"))
            continue
        looked_in.append(described)
    fallback = Registries(registries) if registries else None
    return Schemas(store, looked_in=looked_in, fallback=fallback), problems


def _read_one(source: str, store, topic, limits, registries, capture_options, seen) -> str:
    if source.startswith(("http://", "https://")):
        registries.append(HttpRegistry(source))
        return f"the registry at {source}"
    path = Path(source)
    if not path.exists():
        raise SourceError("no such file or directory")
    if path.is_dir():
        if schema_partitions(path, topic):
            count = read_log_dir(path, store, topic, limits, seen)
            return f"{topic} ({count} partition{'s' if count != 1 else ''}) in {source}"
        if any(p.suffix in EXTENSIONS for p in path.rglob("*")):
            count = read_schema_files(path, store)
            return f"{count} schema files in {source}"
        raise SourceError(f"neither a log dir with {topic}-N partitions (--schemas-topic names "
                          f"another topic) nor a directory of .avsc/.proto/.json files")
    if not path.is_file():  # a FIFO would block the open for good, a device never end
        raise SourceError("not a regular file, a directory or an http(s):// URL")
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:4] in CAPTURE_MAGICS or head[:2] == b"\x1f\x8b":
        from kinspect.schemas.capture import read_capture
        from kinspect.decode.pipeline import CaptureUnreadable
        try:
            count = read_capture(str(path), store, topic, **capture_options)
        except CaptureUnreadable as e:
            raise SourceError(str(e)) from None
        return f"{topic} records ({count}) in the capture {source}"
    raise SourceError("not a log dir, a directory of schema files, a capture or an http(s):// URL")
