"""Issue 10's hostile inputs through every command, each run in a subprocess under the memory
bound (ulimit -v) and a hang timeout: a documented exit code, no traceback, peak RSS under
512 MiB, no raw control byte in any output, and a bound that cuts something says which option
raises it. Timings are measured (tests/bench/hostile.py reports them) but never judged.

The inputs are made once per session (tests/hostile/inputs.py, ~15 s for all of them).
"""

from __future__ import annotations

import pytest

from tests.hostile import cases, runner

MATRIX = cases.matrix()


@pytest.fixture(scope="session")
def hostile_input(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    made = {}

    def make(name: str):
        if name not in made:
            made[name] = cases.BY_NAME[name].make(root)
        return made[name]
    return make


@pytest.mark.parametrize(("name", "command"), MATRIX, ids=[f"{n}:{c}" for n, c in MATRIX])
def test_hostile_input(name, command, hostile_input, tmp_path):
    hostile = cases.BY_NAME[name]
    junit = tmp_path / "report.xml"
    run = runner.run(cases.arguments(hostile, command, hostile_input(name), junit),
                     terminal=cases.is_terminal(command))
    found = cases.problems(hostile, command, run, junit if "junit" in command else None)
    assert not found, report(run, found)


def report(run: runner.Run, found: list[str]) -> str:
    lines = [f"kinspect {' '.join(map(_show, run.args))}", *found,
             f"exit {run.exit_code}, peak RSS {run.peak_rss >> 20} MiB "
             f"(tree PSS {run.tree_pss >> 20} MiB), {run.wall:.1f} s wall, {run.cpu:.1f} s CPU, "
             f"{run.stdout.size} bytes out"]
    if run.stderr.size:
        lines += ["stderr:", run.crash_head()]
    return "\n".join(lines)


def _show(arg) -> str:
    return arg.decode("utf-8", "backslashreplace") if isinstance(arg, bytes) else arg
