"""cli/codecache.py: the generated decoders' bytecode kept between runs, used only where safe."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kinspect import cache, generated
from kinspect.cli import codecache
from kinspect.wire import messages

REPO = Path(__file__).resolve().parents[3]
CAPTURE = REPO / "pcaps" / "kafka-python-sll2.pcap"


@pytest.fixture(autouse=True)
def plain_compile():
    yield
    generated.install(None)


def source_of(key=1, version=12, kind="response"):
    return messages.decoder_source(key, version, kind), f"<kinspect test {key} v{version} {kind}>"


def test_a_second_cache_loads_what_the_first_compiled(tmp_path):
    source, name = source_of()
    first = codecache.CodeCache(str(tmp_path))
    code = first(source, name)
    assert (first.hits, first.misses) == (0, 1)
    again = codecache.CodeCache(str(tmp_path))
    loaded = again(source, name)
    assert (again.hits, again.misses) == (1, 0)
    assert loaded == code and loaded.co_filename == name
    assert loaded is not code  # read back from the file, not held in memory


def test_another_source_or_name_is_another_entry(tmp_path):
    cache = codecache.CodeCache(str(tmp_path))
    source, name = source_of()
    cache(source, name)
    cache(source, name + "x")
    cache(source_of(1, 11)[0], name)
    assert (cache.hits, cache.misses) == (0, 3)
    assert len(os.listdir(tmp_path)) == 3


def test_a_damaged_or_foreign_file_is_compiled_again(tmp_path, monkeypatch):
    source, name = source_of()
    codecache.CodeCache(str(tmp_path))(source, name)
    (entry,) = tmp_path.iterdir()
    entry.write_bytes(entry.read_bytes()[:40])  # cut short
    cache = codecache.CodeCache(str(tmp_path))
    assert cache(source, name).co_filename == name and cache.misses == 1
    entry.write_bytes(b"\xff" * 10)
    assert codecache.CodeCache(str(tmp_path))(source, name).co_filename == name
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 12345)  # the file is someone else's
    foreign = codecache.CodeCache(str(tmp_path))
    foreign(source, name)
    assert (foreign.hits, foreign.misses) == (0, 1)


def test_no_cache_where_others_could_write_or_when_turned_off(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setattr(codecache, "directory", lambda: str(shared))
    assert codecache.install() is None
    assert generated._compiler is generated._compile
    monkeypatch.undo()
    monkeypatch.setenv("KINSPECT_CACHE_DIR", "")
    assert codecache.directory() is None and codecache.install() is None
    monkeypatch.setenv("KINSPECT_CACHE_DIR", str(tmp_path / "mine"))
    cache = codecache.install()
    assert cache is not None and generated._compiler is cache
    assert oct(os.stat(cache.path).st_mode & 0o777) == oct(0o700)


def test_no_cache_through_a_symbolic_link(tmp_path, monkeypatch):
    """A link planted where the cache would be made points at a directory that is this user's."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (tmp_path / "planted").symlink_to(private)
    monkeypatch.setenv("KINSPECT_CACHE_DIR", str(tmp_path / "planted"))
    assert codecache.install() is None and list(private.iterdir()) == []
    (private / "entry").write_bytes(b"x")
    (tmp_path / "link").symlink_to(private / "entry")
    assert cache.own_file(str(tmp_path / "link")) is None
    assert cache.own_file(str(private / "entry")) is not None


def test_an_unwritable_place_means_compiling_as_before(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    cache = codecache.CodeCache(str(tmp_path / "file"))
    source, name = source_of()
    assert cache(source, name).co_filename == name and cache.misses == 1


def test_decode_output_is_the_same_compiled_or_cached(tmp_path):
    def run(cache_dir):
        env = dict(os.environ, KINSPECT_CACHE_DIR=cache_dir)
        return subprocess.run([sys.executable, "-m", "kinspect", "decode", "--json", "-j1", str(CAPTURE)],
                              capture_output=True, env=env, check=True).stdout

    plain = run("")
    filled = run(str(tmp_path))
    entries = list(tmp_path.glob("decoders-*/*"))
    assert entries and not any(e.name.endswith(".tmp") for e in entries)
    stamps = {e: e.stat().st_mtime_ns for e in entries}
    assert run(str(tmp_path)) == filled == plain
    assert {e: e.stat().st_mtime_ns for e in tmp_path.glob("decoders-*/*")} == stamps  # read, not rewritten
