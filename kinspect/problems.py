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


# Exit codes, shared by every command (documented in the README and in each command's --help).
EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 3
EXIT_UNFINISHED = 4    # kinspect could not finish: a worker process died, or an internal error
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


_RANK = {INFO: 1, WARNING: 2, ERROR: 3}


class ProblemCap:
    """Collects the problems of one unit (a batch), keeping the first ``keep`` of each check and
    counting the rest, so a unit of a million bad records costs a few problems, not a million.
    The line that says how many more there were has the worst severity among them."""

    __slots__ = ("problems", "keep", "seen", "worst")

    def __init__(self, problems: list[Problem], keep: int = 10):
        self.problems = problems
        self.keep = keep
        self.seen: dict = {}
        self.worst: dict = {}  # check -> the worst severity of its problems in this unit

    def counted(self, key: str, severity: str | None = None) -> bool:
        """Whether a problem of check ``key`` would only be counted now (and if so, it is):
        callers skip building it."""
        seen = self.seen.get(key, 0)
        if seen < self.keep:
            return False
        self.seen[key] = seen + 1
        self._worst(key, severity)
        return True

    def room(self, key: str) -> int:
        """How many more problems of check ``key`` would be kept, not only counted."""
        return max(self.keep - self.seen.get(key, 0), 0)

    def count(self, key: str, n: int, severity: str | None = None) -> None:
        """``n`` problems of check ``key`` past the ones kept: counted, never built."""
        if n:
            self.seen[key] = self.seen.get(key, 0) + n
            self._worst(key, severity)

    def append(self, problem: Problem) -> None:
        key = problem.check or problem.what
        seen = self.seen.get(key, 0)
        self.seen[key] = seen + 1
        self._worst(key, problem.severity)
        if seen < self.keep:
            self.problems.append(problem)

    def _worst(self, key: str, severity: str | None) -> None:
        if severity is not None and _RANK.get(severity, 0) > _RANK.get(self.worst.get(key), 0):
            self.worst[key] = severity

    def close(self, where: str, at: int | None) -> None:
        """One more problem per check whose problems were cut, saying how many were."""
        for key, seen in self.seen.items():
            if seen > self.keep:
                severity = self.worst.get(key) or next(
                    p.severity for p in self.problems if (p.check or p.what) == key)
                self.problems.append(Problem(
                    f"{seen - self.keep} more {key} problems like the ones above in this unit "
                    f"({seen} in all; the first {self.keep} are shown)", where, at,
                    severity, key))
        self.seen.clear()
        self.worst.clear()
