import math

import pytest

from kinspect.render.kafka_json import double, java_json, java_text, string


def test_jackson_string_escapes():
    assert string('a"b\\c') == '"a\\"b\\\\c"'
    assert string("\x00\x1f\t\n\r\x08\x0c") == '"\\u0000\\u001F\\t\\n\\r\\b\\f"'
    assert string("é😀/") == '"é😀/"'
    assert string(b"\xff") == '"\ufffd"'


# What JDK 17's new String(bytes, UTF_8) made of them (the lab's java, run once); the first four
# are where Python's "replace" differs. The lab checks random bytes live:
# tests/integration/test_dump_secrets_lab.py (SCRAM keys in bootstrap.checkpoint, no decoder).
JAVA_READS = [
    ("77eda611", "w\ufffd\x11"),          # ED A6: one sequence for Java, two for Python
    ("8399edab", "\ufffd" * 3),            # a three-byte sequence cut by the end: one
    ("f1a5edb1bb", "\ufffd" * 2),          # a cut four-byte sequence, then a surrogate
    ("eda080", "\ufffd"),                  # a surrogate: one for its three bytes
    ("e08080", "\ufffd" * 3),              # overlong
    ("f09f9841", "\ufffdA"), ("f09f98", "\ufffd"), ("f4908080", "\ufffd" * 4), ("f8888080", "\ufffd" * 4),
    ("c0af", "\ufffd" * 2), ("e282", "\ufffd"), ("e28241", "\ufffdA"), ("f0", "\ufffd"), ("c3", "\ufffd"),
    ("41c3a9ff42", "A\u00e9\ufffdB"),
]


@pytest.mark.parametrize("raw, text", JAVA_READS)
def test_bytes_that_are_not_utf8_read_as_java_reads_them(raw, text):
    assert java_text(bytes.fromhex(raw)) == text


def test_java_double_to_string():
    cases = [(1.0, "1.0"), (100.0, "100.0"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
             (0.001, "0.001"), (0.0001, "1.0E-4"), (-2.5, "-2.5"), (1e300, "1.0E300"),
             (0.0, "0.0"), (-0.0, "-0.0"), (math.inf, "Infinity"), (1048576.0, "1048576.0")]
    for value, text in cases:
        assert double(value) == text


def test_field_order_names_and_tagged_defaults():
    data = {"partition_id": 0, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "leader": -2,
            "leader_recovery_state": -1, "isr": [1, 2]}
    text = java_json("PartitionChangeRecord", 0, data)
    assert text == '{"partitionId":0,"topicId":"AAAAAAAAAAAAAAAAAAAAAA","isr":[1,2]}'
    data["leader"] = 3
    assert '"isr":[1,2],"leader":3}' in java_json("PartitionChangeRecord", 0, data)


def test_bytes_are_base64_and_nullable_fields_null():
    data = {"name": "u", "mechanism": 1, "salt": b"\x00\x01", "stored_key": b"",
            "server_key": b"k", "iterations": 4096}
    assert java_json("UserScramCredentialRecord", 0, data) == (
        '{"name":"u","mechanism":1,"salt":"AAE=","storedKey":"","serverKey":"aw==",'
        '"iterations":4096}')
    assert java_json("ConfigRecord", 0, {"resource_type": 2, "resource_name": "t", "name": "n",
                                         "value": None}).endswith('"value":null}')
