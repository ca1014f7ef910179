"""Problems: what went wrong in the data, and where.

Data trouble never escapes as an exception. Decoders return what they could decode plus a
list of Problem; renderers show them inline. ``path`` reads like construct's error path
("FetchResponse v13 → responses[2] → partitions[0] → records"), ``offset`` is the byte offset
within the unit named by ``where`` (a frame, a file, a record set).
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
INFO = "info"


@dataclass(slots=True)
class Problem:
    what: str
    path: str = ""
    offset: int | None = None
    severity: str = ERROR
    check: str | None = None
    expected: object = None
    found: object = None

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        at = f" at byte {self.offset:#x}" if self.offset is not None else ""
        return f"{where}{self.what}{at}"

    def to_dict(self) -> dict:
        d = {"severity": self.severity, "what": self.what, "path": self.path, "offset": self.offset}
        if self.check:
            d["check"] = self.check
        if self.expected is not None or self.found is not None:
            d["expected"] = self.expected
            d["found"] = self.found
        return d


# Exit codes, shared by every command (documented in the README).
EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 3
