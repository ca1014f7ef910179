"""tests/run.sh, the README's test command: it installs only what is missing, after one apt-get
update, and runs pip and pytest in the virtual environment .venv, never in the system's Python.

The script runs for real, in a copy of the repository's layout, on a PATH where the machine's
tools are stand-ins that say which of them exist and record how they were called: the set-ups
that matter (Java 11, no socat, a Debian Python without venv) cannot be made on this machine."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

TOOLS = ("tshark", "dumpcap", "editcap", "mergecap", "capinfos", "tcpdump", "ip", "gcc", "strace",
         "socat", "tmux", "chromium", "mvn", "javac")
REAL = ("bash", "dirname", "basename", "awk", "id", "mkdir", "cp")  # what the script itself runs on

LOGGER = """#!/bin/bash
echo "$(basename "$0") $*" >> "$LOG"
"""
JAVA = """#!/bin/bash
echo "java $*" >> "$LOG"
echo "openjdk version \\"$JAVA_VERSION\\" 2024-01-16" >&2
"""
# The interpreter .venv is made from: `-c` answers the checks for ensurepip and Python.h
PYTHON = """#!/bin/bash
echo "python3 $*" >> "$LOG"
if [ "$1" = "-c" ]; then
  case "$2" in *ensurepip*) exit "$NO_ENSUREPIP" ;; *) exit 0 ;; esac
fi
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin" && cp "$VENV_PYTHON" "$3/bin/python"
fi
"""
VENV_PYTHON = """#!/bin/bash
echo "venv-python $* PATH=$PATH VIRTUAL_ENV=${VIRTUAL_ENV:-}${KINSPECT_PURE_PYTHON:+ KINSPECT_PURE_PYTHON=$KINSPECT_PURE_PYTHON}" >> "$LOG"
"""


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def run_script(tmp_path: Path, missing=(), java: str | None = "17.0.15", ensurepip=True, exit_code=0,
               args=("-k", "some_test")):
    """tests/run.sh in tmp_path/repo, with the tools of TOOLS but `missing`: its calls, one a line,
    the repository's copy, its stderr. The copy (and its .venv) stays from one call to the next."""
    repo, bin_dir, log = tmp_path / "repo", tmp_path / "bin", tmp_path / "log"
    (repo / "tests").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "tests" / "run.sh", repo / "tests" / "run.sh")
    shutil.rmtree(bin_dir, ignore_errors=True)
    bin_dir.mkdir()
    for name in REAL:
        (bin_dir / name).symlink_to(shutil.which(name))
    for name in (*TOOLS, "apt-get", "dpkg"):
        if name not in missing:
            executable(bin_dir / name, LOGGER)
    if java is not None:
        executable(bin_dir / "java", JAVA)
    executable(bin_dir / "python3", PYTHON)
    executable(tmp_path / "venv-python", VENV_PYTHON)
    log.write_text("")
    env = {"PATH": str(bin_dir), "LOG": str(log), "HOME": str(tmp_path), "JAVA_VERSION": java or "",
           "NO_ENSUREPIP": "0" if ensurepip else "1", "VENV_PYTHON": str(tmp_path / "venv-python")}
    done = subprocess.run(["bash", str(repo / "tests" / "run.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == exit_code, done.stderr
    calls = [line for line in log.read_text().splitlines() if not line.startswith("java ")]
    return calls, repo, done.stderr


def apt(calls: list[str]) -> list[str]:
    return [line for line in calls if line.startswith("apt-get ")]


def test_nothing_missing_installs_nothing_and_runs_in_the_venv(tmp_path):
    calls, repo, _ = run_script(tmp_path)
    assert apt(calls) == []
    venv = repo / ".venv"
    created, install, tests = calls[-3:]
    assert created == "python3 -m venv .venv"
    assert [line for line in calls if " -m pip" in line] == [install]  # never the system's Python
    assert install.startswith("venv-python -m pip install -q --disable-pip-version-check -e .[test] ")
    assert tests.startswith("venv-python -m pytest -q -p no:cacheprovider -k some_test ")
    assert f" PATH={venv}/bin:" in tests and tests.endswith(f" VIRTUAL_ENV={venv}")


def test_the_whole_suite_then_the_unit_tests_with_the_pure_python_twins(tmp_path):
    calls, _, _ = run_script(tmp_path, args=())
    whole, pure = [line for line in calls if " -m pytest" in line][-2:]
    assert whole.split(" PATH=")[0] == "venv-python -m pytest -q -p no:cacheprovider"
    twins = ["tests/unit/" + d for d in ("capture", "decode", "native", "proxy", "records", "render",
                                          "storage", "tls", "wire")]
    assert pure.split(" PATH=")[0] == ("venv-python -m pytest -q -p no:cacheprovider -m not needs_c " + " ".join(twins)
                                       + " tests/unit/test_validate*.py")
    assert all((REPO / d).is_dir() for d in twins)
    assert pure.endswith(" KINSPECT_PURE_PYTHON=1") and "KINSPECT_PURE_PYTHON" not in whole


def test_an_existing_venv_is_used_again(tmp_path):
    run_script(tmp_path)
    calls, _, _ = run_script(tmp_path)
    assert not [line for line in calls if line.startswith("python3 -m")]
    assert [line.split(" PATH=")[0] for line in calls if line.startswith("venv-python")] == [
        "venv-python -m pip --version", "venv-python -m pip install -q --disable-pip-version-check "
        "-e .[test]", "venv-python -m pytest -q -p no:cacheprovider -k some_test"]


@pytest.mark.parametrize("missing, wanted", [
    (("socat",), ["socat"]),
    (("mvn",), ["maven"]),
    (("tshark", "ip"), ["tshark", "iproute2"]),
    (("editcap",), ["wireshark-common"]),
    (("javac",), ["openjdk-17-jdk-headless"]),
])
def test_each_missing_tool_gets_its_package_after_one_update(tmp_path, missing, wanted):
    calls, _, _ = run_script(tmp_path, missing=missing)
    assert apt(calls) == ["apt-get update -qq", f"apt-get install -y -qq {' '.join(wanted)}"]


@pytest.mark.parametrize("java", ["11.0.22", "1.8.0_392", None])
def test_java_older_than_17_or_none_gets_17(tmp_path, java):
    calls, _, _ = run_script(tmp_path, java=java)
    assert apt(calls) == ["apt-get update -qq", "apt-get install -y -qq openjdk-17-jdk-headless"]


def test_java_21_is_enough(tmp_path):
    calls, _, _ = run_script(tmp_path, java="21")
    assert apt(calls) == []


def test_a_python_without_venv_gets_python3_venv_with_the_others_in_one_install(tmp_path):
    calls, _, _ = run_script(tmp_path, missing=("socat", "strace"), java="11.0.22", ensurepip=False)
    assert apt(calls) == ["apt-get update -qq", "apt-get install -y -qq strace socat "
                          "openjdk-17-jdk-headless python3-venv"]


def test_without_apt_it_names_what_to_install(tmp_path):
    calls, _, stderr = run_script(tmp_path, missing=("socat", "apt-get"), exit_code=1)
    assert stderr == ("tests/run.sh: install these (Debian package names), then run it again: "
                      "socat\n")
    assert not [line for line in calls if " -m " in line]  # neither venv nor pip nor pytest
