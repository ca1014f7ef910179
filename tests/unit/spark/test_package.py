"""kinspect/spark/package.py: the packed environment is written as a new file and renamed into
place, never through what was at its path."""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import pytest
import venv_pack

from kinspect.spark import package


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory):
    """A real virtualenv (without pip: venv-pack needs no more)."""
    env = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    return env


@pytest.fixture
def other_filesystem_tempdir(tmp_path, monkeypatch):
    """Python's temporary directory moved to another file system than ``tmp_path`` (/dev/shm):
    venv-pack packs into a temporary file and moves it to its output, which across file systems
    is a copy, and a copy opens its destination, following a link there."""
    shm = "/dev/shm"
    assert os.path.isdir(shm) and os.stat(shm).st_dev != os.stat(tmp_path).st_dev, \
        "the test needs /dev/shm on another file system than the tests' temporary directory"
    directory = tempfile.mkdtemp(dir=shm)
    monkeypatch.setattr(tempfile, "tempdir", directory)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_a_link_at_the_output_path_is_replaced_and_its_target_left_alone(bare_env, tmp_path,
                                                                       other_filesystem_tempdir):
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    output = tmp_path / "env.tar.gz"
    output.symlink_to(victim)  # planted where --package will write (a shared directory, say)
    package._pack(venv_pack, str(bare_env), str(output))
    assert victim.read_text() == "untouched"
    assert not output.is_symlink()
    with tarfile.open(output) as packed:
        assert "bin/activate" in packed.getnames()
    assert sorted(os.listdir(tmp_path)) == ["env.tar.gz", "victim"]  # no partial file left


def test_an_output_directory_it_cannot_write_is_one_message(bare_env, tmp_path):
    with pytest.raises(package.PackageError, match="cannot write beside"):
        package._pack(venv_pack, str(bare_env), str(tmp_path / "missing" / "env.tar.gz"))
