"""keylog.py: the NSS key-log format, bad lines counted and kept nowhere, the index's memory,
pickling, a file that grows or is replaced, special files refused."""

import os
import pickle
import threading
import tracemalloc

import pytest

from kinspect.tls import keylines, keylog as kl
from kinspect.tls.keylog import KeyLog

CR = "ab" * 32
LINES = f"""# a comment
CLIENT_RANDOM {CR} {'11' * 48}
CLIENT_HANDSHAKE_TRAFFIC_SECRET {'cd' * 32} {'22' * 32}
EXPORTER_SECRET {'cd' * 32} {'33' * 32}
not a key line
CLIENT_RANDOM zz{CR[2:]} {'11' * 48}
CLIENT_RANDOM {CR[:10]} {'11' * 48}
"""


def _tls13_lines(random: str, secret: str) -> str:
    return "".join(f"{label} {random} {secret}\n" for label in (kl.CLIENT_HS, kl.SERVER_HS, kl.CLIENT_AP,
                                                                 kl.SERVER_AP))


def _many(count: int) -> bytes:
    """Key-log lines of ``count`` made-up connections, TLS 1.2 and 1.3 in turn."""
    out = []
    for i in range(count):
        random = i.to_bytes(4, "big").hex() * 8
        if i % 2:
            out.append(f"CLIENT_RANDOM {random} {'5a' * 48}\n")
        else:
            out.append(_tls13_lines(random, "6b" * 32))
    return "".join(out).encode()


def test_lines():
    keylog = KeyLog.from_text(LINES, "keys.txt")
    assert keylog.get(bytes.fromhex(CR)) == {"CLIENT_RANDOM": bytes.fromhex("11" * 48)}
    assert keylog.get(bytes.fromhex("cd" * 32)) == {"CLIENT_HANDSHAKE_TRAFFIC_SECRET": bytes.fromhex("22" * 32)}
    assert keylog.get(bytes.fromhex("ef" * 32)) is None and keylog.get(b"short") is None
    assert keylog.unused == 1  # EXPORTER_SECRET
    assert keylog.bad_lines == 3 and len(keylog) == 2
    assert keylog.first_bad == "keys.txt:5: not three fields (LABEL CLIENT_RANDOM SECRET)"
    assert "3 lines not understood (first: keys.txt:5: " in keylog.summary()


def test_why_a_line_is_bad():
    for line, why in [(f"CLIENT_RANDOM zz{CR[2:]} {'11' * 48}", "not hexadecimal"),
                      (f"CLIENT_RANDOM {CR[:10]} {'11' * 48}", "client random of 5 bytes or secret of 48"),
                      (f"NOT_A_LABEL {CR} {'11' * 48}", "unknown label 'NOT_A_LABEL'"),
                      ("x" * 2000, "longer than 1024 bytes"), ("a b c d", "not three fields")]:
        keylog = KeyLog.from_text("\n\n" + line + "\n", "k")
        assert keylog.bad_lines == 1 and keylog.first_bad.startswith("k:3: ") and why in keylog.first_bad


def test_the_last_line_of_a_label_wins_and_every_label_is_kept():
    random = "01" * 32
    text = _tls13_lines(random, "aa" * 32) + f"{kl.CLIENT_AP} {random} {'bb' * 48}\n"
    secrets = KeyLog.from_text(text).get(bytes.fromhex(random))
    assert secrets == {kl.CLIENT_HS: bytes.fromhex("aa" * 32), kl.SERVER_HS: bytes.fromhex("aa" * 32),
                       kl.CLIENT_AP: bytes.fromhex("bb" * 48), kl.SERVER_AP: bytes.fromhex("aa" * 32)}


def test_randoms_that_share_their_first_bytes_are_told_apart():
    first, second = "77" * 8 + "01" * 24, "77" * 8 + "02" * 24
    keylog = KeyLog.from_text(f"CLIENT_RANDOM {first} {'11' * 48}\nCLIENT_RANDOM {second} {'22' * 48}\n")
    assert keylog.get(bytes.fromhex(first)) == {kl.MASTER: bytes.fromhex("11" * 48)}
    assert keylog.get(bytes.fromhex(second)) == {kl.MASTER: bytes.fromhex("22" * 48)}
    assert keylog.get(bytes.fromhex("77" * 8 + "03" * 24)) is None
    assert [r.hex() for r, _ in keylog.items()] == [first, second]


def test_junk_lines_are_counted_and_kept_nowhere():
    """Issue 30: every line not understood was kept (3.5 GB for a 64 MiB key log of junk). A
    million junk lines now cost no memory while they are read, and none after."""
    junk = b"x\n" * 1_000_000 + b"CLIENT_RANDOM zz zz\n" * 1000
    tracemalloc.start()
    try:
        keylog = KeyLog.from_text(junk, "junk.log")
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert keylog.bad_lines == 1_001_000 and keylog.first_bad.startswith("junk.log:1: ")
    assert len(keylog) == 0 and keylog._sources == []  # the text is not kept: it holds no secret
    assert peak < 1 << 20, peak


def test_the_index_costs_16_bytes_a_secret(tmp_path):
    """Issue 30: a valid key log cost its size in memory (a dict per connection). What stays is
    16 bytes per secret, whatever the lines' length; the file is read again for a secret."""
    path = tmp_path / "keys.log"
    text = _many(30_000)
    path.write_bytes(text)
    lines = text.count(b"\n")
    tracemalloc.start()
    try:
        keylog = KeyLog.from_files([path])
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(keylog) == lines == 75_000
    assert kept < 20 * lines, (kept, lines)
    assert keylog.get((7).to_bytes(4, "big") * 8) == {kl.MASTER: bytes.fromhex("5a" * 48)}
    assert keylog.get((8).to_bytes(4, "big") * 8)[kl.SERVER_AP] == bytes.fromhex("6b" * 32)


def test_a_file_is_read_in_chunks_and_lines_cut_between_them_are_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(kl, "CHUNK", 100)  # lines of 110-160 bytes: every one is cut
    path = tmp_path / "keys.log"
    text = _many(50).replace(b"\n", b"\r\n") + b"junk line\r\n"
    path.write_bytes(text)
    keylog = KeyLog.from_files([path])
    assert len(keylog) == 125 and keylog.bad_lines == 1 and keylog.first_bad == f"{path}:126: not three fields " \
                                                                                 "(LABEL CLIENT_RANDOM SECRET)"
    assert dict(keylog.items()) == dict(KeyLog.from_text(text).items())
    assert len(dict(keylog.items())) == 50


def test_many_reads_stay_few_runs(monkeypatch):
    """Each read makes a sorted run; runs are merged as they come (sizes halve at least), so a
    lookup searches a few of them."""
    keylog = KeyLog()
    for i in range(200):
        keylog.add_text(f"CLIENT_RANDOM {i.to_bytes(32, 'big').hex()} {'11' * 48}\n")
    assert len(keylog._runs) <= 8
    assert all(keylog.get(i.to_bytes(32, "big")) for i in range(200))


def test_past_max_entries_secrets_are_counted_not_kept(monkeypatch):
    monkeypatch.setattr(kl, "MAX_ENTRIES", 10)
    keylog = KeyLog.from_text(_many(8))  # 4 TLS 1.3 connections (16 lines) and 4 TLS 1.2
    assert len(keylog) == 10 and keylog.dropped == 10 and "10 secrets past the first 10" in keylog.summary()


def test_a_client_random_with_thousands_of_lines_reads_only_the_last(monkeypatch):
    """A hostile key log: 10,000 lines of one client random, or of randoms made to share its
    key (keylines.random_key). A lookup reads the last few lines, not all."""
    same_key = "".join(  # a first word and the second that gives key 0 after it
        f"CLIENT_RANDOM {(i.to_bytes(8, 'big') + (i * keylines.MIX & keylines.U64).to_bytes(8, 'big') + bytes(16)).hex()} "
        f"{'33' * 48}\n" for i in range(1, 10_000))
    assert {keylines.random_key(bytes.fromhex(line.split()[1])) for line in same_key.splitlines()} == {0}
    text = f"CLIENT_RANDOM {CR} {'11' * 48}\n" * 10_000 + f"CLIENT_RANDOM {CR} {'22' * 48}\n" + same_key
    keylog = KeyLog.from_text(text)
    read = []
    original = kl.parse_line
    monkeypatch.setattr(kl, "parse_line", lambda line: read.append(line) or original(line))
    assert keylog.get(bytes.fromhex(CR)) == {kl.MASTER: bytes.fromhex("22" * 48)}
    assert len(read) == kl.MAX_CANDIDATES
    read.clear()
    assert keylog.get(bytes(32)) is None and len(read) == kl.MAX_READ


def test_pickles():
    keylog = KeyLog.from_text(LINES)
    again = pickle.loads(pickle.dumps(keylog))
    assert dict(again.items()) == dict(keylog.items()) and again.bad_lines == keylog.bad_lines


def test_portable_and_subset_need_no_file(tmp_path):
    path = tmp_path / "keys.log"
    path.write_bytes(_many(40) + b"junk\n")
    keylog = KeyLog.from_files([path])
    portable = pickle.loads(pickle.dumps(keylog.portable()))
    path.unlink()
    assert dict(portable.items()) == dict(keylog.items()) and len(dict(portable.items())) == 40
    assert portable.bad_lines == 1 and portable.paths == []
    wanted = [(3).to_bytes(4, "big") * 8, (4).to_bytes(4, "big") * 8, b"\xff" * 32]
    subset = portable.subset(wanted)
    assert [r for r, _ in subset.items()] == wanted[:2] and subset.get(wanted[1]) == portable.get(wanted[1])


def test_refresh_reads_what_was_appended(tmp_path):
    path = tmp_path / "sslkeys.log"
    path.write_text(f"CLIENT_RANDOM {CR} {'11' * 48}\nCLIENT_RANDOM {'ef' * 32} {'44' * 24}")  # a line still being written
    keylog = KeyLog.from_files([path])
    assert len(keylog) == 1 and keylog.bad_lines == 0
    with open(path, "a") as f:
        f.write(f"{'44' * 24}\n# next\nCLIENT_RANDOM {'01' * 32} {'55' * 48}\n")
    assert keylog.refresh() == 2
    assert keylog.get(bytes.fromhex("ef" * 32))["CLIENT_RANDOM"] == bytes.fromhex("44" * 48)
    assert keylog.refresh() == 0
    path.write_text(f"CLIENT_RANDOM {'02' * 32} {'66' * 48}\n")  # cut short and written again: read anew
    assert keylog.refresh() == 1 and len(keylog) == 4
    assert keylog.get(bytes.fromhex("02" * 32)) == {kl.MASTER: bytes.fromhex("66" * 48)}
    assert keylog.get(bytes.fromhex(CR)) is None  # its line is gone from the file
    again = pickle.loads(pickle.dumps(keylog))
    assert again.refresh() == 0 and again.get(bytes.fromhex("02" * 32))


def test_a_replaced_file_is_still_read_from_its_old_self(tmp_path):
    """A key log replaced by another file (rename over it): the secrets read from the first
    stay, it is kept open; the new one is read from its start."""
    path = tmp_path / "sslkeys.log"
    path.write_text(f"CLIENT_RANDOM {CR} {'11' * 48}\n")
    keylog = KeyLog.from_files([path])
    (tmp_path / "next.log").write_text(f"CLIENT_RANDOM {'02' * 32} {'66' * 48}\n")
    os.replace(tmp_path / "next.log", path)
    assert keylog.refresh() == 1
    assert keylog.get(bytes.fromhex(CR)) == {kl.MASTER: bytes.fromhex("11" * 48)}
    assert keylog.get(bytes.fromhex("02" * 32)) == {kl.MASTER: bytes.fromhex("66" * 48)}


def test_a_missing_file_is_noted_not_raised(tmp_path):
    keylog = KeyLog.from_files([tmp_path / "nope.log"])
    assert len(keylog) == 0 and keylog.read_errors and "nope.log" in keylog.read_errors[0]
    assert keylog.not_regular == []


def test_a_fifo_is_refused_without_blocking(tmp_path):
    """Issue 30: a FIFO given as a key log blocked its reader for ever (open waits for a writer)."""
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    found = []
    reader = threading.Thread(target=lambda: found.append(KeyLog.from_files([fifo])), daemon=True)
    reader.start()
    reader.join(20)
    if reader.is_alive():  # unblock the reader, then fail
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO as a key log blocked")
    [keylog] = found
    assert keylog.not_regular == [str(fifo)] and "not a regular file" in keylog.read_errors[0]
    assert keylog.refresh() == 0 and len(keylog.read_errors) == 1  # said once


def test_a_long_line_cut_between_reads_has_the_verdict_it_has_whole(tmp_path, monkeypatch):
    """A line longer than MAX_LINE still being written is held as MAX_LINE + 1 bytes that end the
    same way (blank so far, a comment, or bad), not as its first bytes: its fields may come later."""
    monkeypatch.setattr(kl, "CHUNK", 700)
    lines = [b" " * 1500 + b"a b c", b" " * 1200 + b"# a long comment " * 10, b"\t" * 2000, b"x" * 3000,
             f"CLIENT_RANDOM {CR} {'11' * 48}".encode()]
    text = b"\n".join(lines) + b"\n"
    path = tmp_path / "keys.log"
    path.write_bytes(text)
    keylog = KeyLog.from_files([path])
    whole = KeyLog.from_text(text)
    assert (keylog.bad_lines, keylog.lines) == (whole.bad_lines, whole.lines) == (2, 1)
    assert keylog.first_bad == f"{path}:1: longer than 1024 bytes"


def test_a_text_of_junk_around_a_secret_is_not_kept_whole():
    """A Decryption Secrets Block of 64 MiB of junk and one secret (a 66 KB .pcapng.gz) would keep
    the 64 MiB alive with the key log, once per capture: only the secrets' lines are kept."""
    junk = b"x\n" * 1_000_000
    text = junk + f"CLIENT_RANDOM {CR} {'11' * 48}\n".encode() + junk + _tls13_lines("02" * 32, "33" * 32).encode()
    keylog = KeyLog()
    assert keylog.add_text(text, "pcapng decryption secrets block") == 5
    assert keylog.bad_lines == 2_000_000 and keylog.first_bad.startswith("pcapng decryption secrets block:1: ")
    [kept] = keylog._sources
    assert len(kept) < 1024
    assert keylog.get(bytes.fromhex(CR)) == {kl.MASTER: bytes.fromhex("11" * 48)}
    assert keylog.get(bytes.fromhex("02" * 32))[kl.SERVER_AP] == bytes.fromhex("33" * 32)
    mostly_secrets = _many(10)
    keylog.add_text(mostly_secrets)
    assert keylog._sources[1] is mostly_secrets  # kept as it is, by reference
