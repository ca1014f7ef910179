"""ProblemCap: the first few problems of a check are kept, the rest counted, and the line that
counts them has the worst severity among them, whatever came before in the shared list."""

from __future__ import annotations

from kinspect.problems import ERROR, INFO, WARNING, Problem, ProblemCap


def problem(severity: str, check: str = "headers") -> Problem:
    return Problem(f"a {severity}", "records → batch[1]", 7, severity, check)


def more_line(problems: list[Problem]) -> Problem:
    return next(p for p in problems if " more " in p.what)


def test_the_count_line_takes_the_worst_severity_of_its_unit():
    earlier = [problem(WARNING)]  # a key warning of an earlier batch, in the same list
    cap = ProblemCap(earlier, keep=2)
    cap.append(problem(WARNING))
    cap.append(problem(WARNING))
    cap.append(problem(ERROR))    # cut, but an error: the count line says error
    cap.close("records → batch[1]", 7)
    line = more_line(earlier)
    assert line.severity == ERROR and line.what.startswith("1 more headers problems")


def test_counted_and_count_carry_their_severity():
    cap = ProblemCap([], keep=1)
    cap.append(problem(INFO, "offset_delta_order"))
    assert cap.counted("offset_delta_order", ERROR)
    cap.count("offset_delta_order", 5, WARNING)
    cap.close("b", 0)
    line = more_line(cap.problems)
    assert line.severity == ERROR and line.what.startswith("6 more offset_delta_order problems")


def test_without_a_severity_the_first_kept_one_decides():
    cap = ProblemCap([], keep=1)
    cap.append(problem(WARNING))
    cap.count("headers", 3)
    cap.close("b", 0)
    assert more_line(cap.problems).severity == WARNING


def test_a_unit_closed_starts_afresh():
    cap = ProblemCap([], keep=1)
    cap.append(problem(ERROR))
    cap.append(problem(ERROR))
    cap.close("b", 0)
    cap.append(problem(WARNING))
    cap.append(problem(WARNING))
    cap.close("b", 0)
    assert [p.severity for p in cap.problems if " more " in p.what] == [ERROR, WARNING]
