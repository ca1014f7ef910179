"""JUnit XML for CI (GitLab, Jenkins, GitHub test-report actions): a testsuite per validated
file, a testcase per check family, a failure per family that found problems. Only elements and
attributes of the schema Jenkins validates reports against are written.

Findings that do not fail the run (warnings without --strict, information) are listed in the
testcase's system-out. Only the first ``keep`` findings of a family are kept in memory; the
rest are counted.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict

from kinspect.problems import ERROR, WARNING
from kinspect.validate import CAPTURE_FAMILIES, CHECK_FAMILIES, FileReport, Finding, check_family

# XML 1.0 allows no control characters besides tab, newline and carriage return
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


class _Family:
    __slots__ = ("failing", "passing", "failures", "notes")

    def __init__(self):
        self.failing: list[Finding] = []
        self.passing: list[Finding] = []
        self.failures = 0
        self.notes = 0


class JUnitReport:
    """Collect findings file by file (``add``, then ``end_file``), then ``to_xml``."""

    def __init__(self, strict: bool = False, keep: int = 50):
        self.strict = strict
        self.keep = keep
        self._families: dict[str, _Family] = defaultdict(_Family)
        self._root = ET.Element("testsuites", name="kinspect validate")
        self._totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}

    def fails(self, finding: Finding) -> bool:
        return finding.severity == ERROR or (self.strict and finding.severity == WARNING)

    def add(self, finding: Finding) -> None:
        family = self._families[check_family(finding.check)]
        if self.fails(finding):
            family.failures += 1
            if len(family.failing) < self.keep:
                family.failing.append(finding)
        else:
            family.notes += 1
            if len(family.passing) < self.keep:
                family.passing.append(finding)

    def end_file(self, report: FileReport) -> None:
        suite = ET.SubElement(self._root, "testsuite", name=_clean(report.file),
                              time=f"{report.seconds:.3f}")
        properties = ET.SubElement(suite, "properties")
        for name in ("kind", "size", "batches", "records"):
            value = report.kind if name == "kind" else getattr(report, name)
            ET.SubElement(properties, "property", name=name, value=str(value))
        tests = failures = errors = 0
        if report.unreadable is not None:
            case = ET.SubElement(suite, "testcase", name="read", classname=_clean(report.file),
                                 time="0")
            ET.SubElement(case, "error", message=_clean(report.unreadable),
                          type="unreadable").text = _clean(report.unreadable)
            tests, errors = 1, 1
        else:
            names = list(CHECK_FAMILIES)
            names += CAPTURE_FAMILIES if report.kind == "capture" else ()
            names += [name for name in self._families if name not in names]
            for name in names:
                tests += 1
                failures += self._testcase(suite, report.file, name, self._families.get(name))
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", "0")
        for key, value in (("tests", tests), ("failures", failures), ("errors", errors),
                           ("time", report.seconds)):
            self._totals[key] += value
        self._families.clear()

    def _testcase(self, suite: ET.Element, file: str, name: str, family: _Family | None) -> int:
        case = ET.SubElement(suite, "testcase", name=name, classname=_clean(file), time="0")
        if family is None:
            return 0
        if family.failures:
            first = family.failing[0]
            more = f" (and {family.failures - 1} more)" if family.failures > 1 else ""
            failure = ET.SubElement(case, "failure", type=first.check,
                                    message=_clean(f"{first}{more}"))
            failure.text = _clean(_lines(family.failing, family.failures))
        if family.notes:
            ET.SubElement(case, "system-out").text = _clean(_lines(family.passing, family.notes))
        return 1 if family.failures else 0

    def to_xml(self) -> bytes:
        for key, value in self._totals.items():
            self._root.set(key, f"{value:.3f}" if key == "time" else str(value))
        ET.indent(self._root)
        return ET.tostring(self._root, encoding="utf-8", xml_declaration=True)


def _lines(findings: list[Finding], total: int) -> str:
    lines = [f"{f.severity}: {f}" for f in findings]
    if total > len(findings):
        lines.append(f"... {total - len(findings)} more not shown")
    return "\n".join(lines)
