"""The README stays true: its examples' output is what kinspect prints today, its first command
works as written on a system Python that refuses pip installs (PEP 668), CI runs its test
command, and nothing in the README or the tests reaches outside the repository."""

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

README = REPO / "README.md"
DEBIAN_PYTHON = Path("/usr/bin/python3")  # Debian's own, "externally managed"
EXCHANGE_LINE = re.compile(r"\d\d:\d\d:\d\d\.\d{6}  \S+-\S+  \w+ v\d+  #\d+  ")


def setup_commands() -> list[str]:
    """The ```sh blocks of the README's set-up section, in order."""
    section = README.read_text().split("\n## Set-up", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_readme_examples_show_real_current_output():
    result = subprocess.run([sys.executable, "tools/readme_examples.py", "--check"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ci_runs_the_readme_test_command():
    install, tests = setup_commands()
    assert install == ("python3 -m venv .venv && .venv/bin/pip install . && "
                       ".venv/bin/kinspect decode pcaps/librdkafka-produce-consume.pcapng")
    assert tests == "bash tests/run.sh"
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "exec bash tests/run.sh"]


def _externally_managed(python: Path) -> bool:
    stdlib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return (Path(stdlib) / "EXTERNALLY-MANAGED").exists()


def test_the_first_command_works_as_written_in_a_fresh_clone(tmp_path):
    """Run with Debian's own python3 when the machine has it (pip refuses to install into it),
    else with the Python running the tests; on a clone of HEAD, with nothing beside it."""
    python = DEBIAN_PYTHON if DEBIAN_PYTHON.exists() else Path(sys.executable)
    clone = tmp_path / "kinspect"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
    bin_dir = tmp_path / "bin"  # python3 and pip are that Python's, as on a stock machine
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    for name in ("pip", "pip3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{python}" -m pip "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(bin_dir), "/usr/local/bin", "/usr/bin", "/bin"])
    if _externally_managed(python):  # why the command makes a virtual environment
        refused = subprocess.run([python, "-m", "pip", "install", "--dry-run", "--no-deps", "."],
                                 cwd=clone, capture_output=True, text=True, env=env, timeout=300)
        if "No module named pip" not in refused.stderr:
            assert refused.returncode != 0 and "externally-managed-environment" in refused.stderr
    install, _ = setup_commands()
    done = subprocess.run(install, shell=True, cwd=clone, capture_output=True, text=True, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()  # pip's, then decode's
    first = next(n for n, line in enumerate(lines) if EXCHANGE_LINE.match(line))
    decoded = lines[first:]
    assert len(decoded) > 10 and all(EXCHANGE_LINE.match(line) for line in decoded), decoded
    assert any(" Produce v" in line for line in decoded) and any(" Fetch v" in line for line in decoded)
    assert (clone / ".venv" / "bin" / "kinspect").exists()


# -- the repository stands alone --------------------------------------------------------------

OUTSIDE = ("shared/realdata", "shared/kafka-message-specs", "../shared", "/work/")
SCANNED = {".py", ".md", ".sh", ".toml", ".cfg", ".ini", ".txt"}
NOT_SCANNED = (REPO / "tests" / "data", REPO / "tests" / "bench" / "results")  # data, records of runs
PARENT_DIRS = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.\-/]*)")
FILE_PARENTS = re.compile(r"__file__\)?\.resolve\(\)\.parents\[(\d+)\]")
ROOT_PARENT = re.compile(r"\b(?:REPO|ROOT)\s*\.\s*parent\b|\b(?:REPO|ROOT)\.parents\[")


def scanned_files() -> list[Path]:
    files = [README, REPO / ".ci" / "run", REPO / "tools" / "readme_examples.py"]
    for path in sorted((REPO / "tests").rglob("*")):
        if path.is_file() and path.suffix in SCANNED and path != Path(__file__) and not any(
                path.is_relative_to(skipped) for skipped in NOT_SCANNED):  # here: the probes below
            files.append(path)
    return files


def outside_references(path: Path, text: str | None = None) -> list[str]:
    """Every place in the file (or in text, as if it were the file's) that names a path outside
    the repository."""
    found = []
    text = path.read_text(errors="replace") if text is None else text
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        if any(fragment in line for fragment in OUTSIDE) or ROOT_PARENT.search(line):
            found.append(where)
        for relative in PARENT_DIRS.findall(line):
            if not any((base / relative).resolve().is_relative_to(REPO) for base in (REPO, path.parent)):
                found.append(where)
        for depth in FILE_PARENTS.findall(line):
            if not path.resolve().parents[int(depth)].is_relative_to(REPO):
                found.append(where)
    return found


def test_nothing_in_the_readme_or_the_tests_reaches_outside_the_repository():
    files = scanned_files()
    assert README in files and REPO / "tests" / "conftest.py" in files
    found = [where for path in files for where in outside_references(path)]
    assert found == []


def test_the_check_finds_each_way_out():
    probe = REPO / "tests" / "unit" / "probe.py"
    leaving = ['SHARED = REPO.parent / "shared"', "kinspect decode ../shared/realdata/ndpi/kafka.pcapng",
               "cat ../../../other/file", "ROOT = Path(__file__).resolve().parents[3]",
               'SPECS = "/work/shared/kafka-message-specs"']
    staying = ['"codec-zstd-0/../codec-zstd-0/x"', "REPO = Path(__file__).resolve().parents[2]",
               "cat ../conftest.py", "see tests/data/thirdparty/SOURCES.md"]
    for line in leaving + staying:
        assert bool(outside_references(probe, line)) == (line in leaving), line
