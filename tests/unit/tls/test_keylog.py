"""keylog.py: the NSS key-log format, bad lines, pickling, and a file that grows."""

import pickle

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


def test_lines():
    keylog = KeyLog.from_text(LINES, "keys.txt")
    assert keylog.get(bytes.fromhex(CR)) == {"CLIENT_RANDOM": bytes.fromhex("11" * 48)}
    assert keylog.get(bytes.fromhex("cd" * 32)) == {"CLIENT_HANDSHAKE_TRAFFIC_SECRET": bytes.fromhex("22" * 32)}
    assert keylog.unused == 1  # EXPORTER_SECRET
    assert keylog.bad_lines == 3
    assert keylog.bad_examples[0].startswith("keys.txt:5: ")
    assert "not hexadecimal" in keylog.bad_examples[1]
    assert "3 lines not understood" in keylog.summary()


def test_pickles():
    keylog = KeyLog.from_text(LINES)
    again = pickle.loads(pickle.dumps(keylog))
    assert again.secrets == keylog.secrets and again.bad_lines == keylog.bad_lines


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
    path.write_text(f"CLIENT_RANDOM {'02' * 32} {'66' * 48}\n")  # replaced by a shorter file
    assert keylog.refresh() == 1 and len(keylog) == 4
    again = pickle.loads(pickle.dumps(keylog))
    assert again.refresh() == 0


def test_a_missing_file_is_noted_not_raised(tmp_path):
    keylog = KeyLog.from_files([tmp_path / "nope.log"])
    assert len(keylog) == 0 and keylog.read_errors and "nope.log" in keylog.read_errors[0]
