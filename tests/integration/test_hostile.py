"""Issue 10's hostile inputs through every command, each run in a subprocess under the memory
bound (ulimit -v) and a hang timeout: a documented exit code, no traceback, peak RSS under
512 MiB, no raw control byte in any output, and a bound that cuts something says which option
raises it. Timings are measured (tests/bench/hostile.py reports them) but never judged, so two
cases run at a time (hostile_runs).

The inputs are made once per session (tests/hostile/inputs.py, ~15 s for all of them).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.hostile import cases, forkserver, runner

MATRIX = cases.matrix()


AHEAD = 1  # cases run beside the one under test: two kinspect processes at a time, one per CPU


@pytest.fixture(scope="session")
def hostile_input(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    made = {}

    def make(name: str):
        if name not in made:
            made[name] = cases.BY_NAME[name].make(root)
        return made[name]
    return make


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory):
    """One Python that has imported kinspect, forking each run (tests/hostile/forkserver.py)."""
    server = forkserver.ForkServer(str(tmp_path_factory.mktemp("forkserver")), runner.environment())
    yield server
    server.close()


@pytest.fixture(scope="session")
def hostile_runs(request, hostile_input, fork_server, tmp_path_factory):
    """Each case's run, started AHEAD cases early on a thread of its own: the runs are separate
    processes, each under its own limits and hang timer, and timings are never judged. Inputs
    are made on the test's thread, in order."""
    selected = [item.callspec.params for item in request.session.items
                if item.originalname == "test_hostile_input"]
    order = [(p["name"], p["command"]) for p in selected]
    pool = ThreadPoolExecutor(max_workers=AHEAD + 1, thread_name_prefix="hostile")
    started: dict[tuple[str, str], tuple] = {}

    def start(case):
        if case not in started:
            name, command = case
            junit = tmp_path_factory.mktemp("junit") / "report.xml"
            args = cases.arguments(cases.BY_NAME[name], command, hostile_input(name), junit)
            started[case] = (pool.submit(runner.run, args, terminal=cases.is_terminal(command),
                                         server=fork_server), junit)

    def result(name: str, command: str):
        case = (name, command)
        at = order.index(case) if case in order else len(order)
        for ahead in [case, *order[at + 1:at + 1 + AHEAD]]:
            start(ahead)
        future, junit = started.pop(case)
        return future.result(), junit

    yield result
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(("name", "command"), MATRIX, ids=[f"{n}:{c}" for n, c in MATRIX])
def test_hostile_input(name, command, hostile_runs):
    hostile = cases.BY_NAME[name]
    run, junit = hostile_runs(name, command)
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
