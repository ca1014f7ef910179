"""inputs.walk: one rule for what every command reads from its paths."""

from __future__ import annotations

import os
from pathlib import Path

from kinspect.inputs import Tally, walk


def kinds(path: Path, named: bool) -> str | None:
    return "capture" if named or path.read_bytes().startswith(b"\xd4\xc3\xb2\xa1") else None


def entries(*paths, **options):
    return [(e.path.name, e.named, e.kind, e.skipped, e.unreadable)
            for e in walk(paths, kinds, unrecognised="not a capture", **options)]


def test_a_directory_is_walked_and_what_is_not_read_says_why(tmp_path):
    (tmp_path / "a.pcap").write_bytes(b"\xd4\xc3\xb2\xa1rest")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / ".hidden.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    (tmp_path / "up").symlink_to(tmp_path, target_is_directory=True)
    odd = os.fsencode(tmp_path) + b"/caf\xe9.pcap"  # a name that is not UTF-8
    with open(odd, "wb") as f:
        f.write(b"\xd4\xc3\xb2\xa1")
    found = entries(tmp_path)
    assert found == [
        (".hidden.pcap", False, None, "hidden", None),
        ("a.pcap", False, "capture", None, None),
        ("broken", False, None, "a broken link", None),
        (os.fsdecode(b"caf\xe9.pcap"), False, "capture", None, None),
        ("fifo", False, None, "a FIFO", None),
        ("loop", False, None, "a link loop", None),
        ("notes.txt", False, None, "not a capture", None),
        ("up", False, None, "a link to a directory", None),
        ("b.pcap", False, "capture", None, None),
    ]
    tally = Tally()
    for entry in walk([tmp_path], kinds, unrecognised="not a capture"):
        tally.add(entry)
    assert tally.read == 3 and tally.unreadable == 0
    assert tally.skipped_line() == ("6 files skipped (hidden: 1, a broken link: 1, a FIFO: 1, a link loop: 1, "
                                    "not a capture: 1, a link to a directory: 1)")


def test_a_directory_deeper_than_pythons_recursion_limit(tmp_path):
    """os.walk recursed: 1,500 nested directories ended it with a RecursionError."""
    deepest = tmp_path
    for _ in range(1500):
        deepest = deepest / "d"
        os.mkdir(deepest)
    (deepest / "a.pcap").write_bytes(b"\xd4\xc3\xb2\xa1")
    (found,) = walk([tmp_path], kinds)
    assert found.kind == "capture" and str(found.path).count("/d") == 1500
    while deepest != tmp_path:  # no recursion in the clean-up either
        for child in deepest.iterdir():
            child.unlink()
        deepest.rmdir()
        deepest = deepest.parent


def test_named_paths_are_the_commands_to_judge(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    os.mkfifo(tmp_path / "fifo")
    assert entries(tmp_path / "notes.txt", tmp_path / "missing") == [
        ("notes.txt", True, "capture", None, None),
        ("missing", True, None, None, "No such file or directory")]
    assert entries(tmp_path / "fifo") == [("fifo", True, None, "a FIFO", None)]
    assert entries(tmp_path / "fifo", streams=True) == [("fifo", True, "capture", None, None)]
    assert entries("-", streams=True) == [("-", True, "capture", None, None)]


def test_a_file_that_cannot_be_read_is_unreadable_not_skipped(tmp_path):
    (tmp_path / "a.pcap").write_bytes(b"x")

    def denied(path, named):
        raise PermissionError(13, "Permission denied", str(path))

    found = [(e.kind, e.skipped, e.unreadable) for e in walk([tmp_path], denied)]
    assert found == [(None, None, "Permission denied")]
