"""The pre-commit hook, for real: `pre-commit try-repo` against this repository, from another
project's git repository holding Kafka fixtures. pre-commit builds the hook's environment from
this repository (pip install) as it would for any user; that needs PyPI, as tests/run.sh does.
Not marked: it runs in CI with the rest of the suite (about a minute).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO, SAMPLES
from tests.samples_oracle import counts

FIXTURES = REPO / "tests" / "unit" / "records" / "fixtures"
SEGMENT = SAMPLES / "kafka-4.1.2" / "logs" / "codec-snappy-0" / "00000000000000000000.log"


@pytest.fixture(scope="module")
def pre_commit() -> list[str]:
    if importlib.util.find_spec("pre_commit") is None:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                        "--disable-pip-version-check", "pre-commit"], check=True, timeout=600)
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture
def project(tmp_path):
    """Another project's repository: Kafka fixtures beside files that are not Kafka data."""
    root = tmp_path / "project"
    (root / "fixtures" / "orders-0").mkdir(parents=True)
    good = (FIXTURES / "2_zstd_create.bin").read_bytes()
    (root / "fixtures" / "good.bin").write_bytes(good)
    (root / "fixtures" / "legacy.bin").write_bytes((FIXTURES / "0_snappy_create.bin").read_bytes())
    (root / "fixtures" / "orders-0" / "00000000000000000000.log").write_bytes(SEGMENT.read_bytes())
    (root / "firmware.bin").write_bytes(bytes(range(256)) * 4)  # .bin, but not Kafka data
    (root / "server.log").write_text("2025-01-01 INFO started\n")  # .log, not a segment
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _try_repo(pre_commit: list[str], project, tmp_path) -> subprocess.CompletedProcess:
    """try-repo builds the hook's environment afresh each time (a store of its own). The build
    compiles kinspect's C modules two at a time (setuptools reads DIST_EXTRA_CONFIG's
    [build_ext] parallel): the same modules, built on both CPUs instead of one."""
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    build = tmp_path / "build-ext.cfg"
    build.write_text("[build_ext]\nparallel = 2\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
           "PRE_COMMIT_COLOR": "never", "DIST_EXTRA_CONFIG": str(build)}
    return subprocess.run([*pre_commit, "try-repo", str(REPO), "kinspect-validate", "--all-files"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)


def test_hook_passes_clean_fixtures_and_fails_a_damaged_one(pre_commit, project, tmp_path):
    done = _try_repo(pre_commit, project, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kinspect validate (Kafka record integrity)" in done.stdout and "Passed" in done.stdout

    bad = bytearray((project / "fixtures" / "good.bin").read_bytes())
    bad[40] ^= 0x01
    (project / "fixtures" / "bad.bin").write_bytes(bytes(bad))
    done = _try_repo(pre_commit, project, tmp_path)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "Failed" in out and "exit code: 1" in out
    assert "FAIL       fixtures/bad.bin  records: 1 batches, 7 records" in out
    assert "crc at byte 0x11, batch[0], base offset 100" in out
    for clean in ("fixtures/good.bin", "fixtures/legacy.bin"):
        assert f"OK         {clean}  " in out
    batches, records = counts(SEGMENT)
    assert (f"OK         fixtures/orders-0/00000000000000000000.log  segment: {batches} batches, "
            f"{records} records") in out
    assert "firmware.bin" not in out and "server.log" not in out
