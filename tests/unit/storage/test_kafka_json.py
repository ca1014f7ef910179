import math

from kinspect.storage.kafka_json import double, java_json, string


def test_jackson_string_escapes():
    assert string('a"b\\c') == '"a\\"b\\\\c"'
    assert string("\x00\x1f\t\n\r\x08\x0c") == '"\\u0000\\u001F\\t\\n\\r\\b\\f"'
    assert string("é😀/") == '"é😀/"'
    assert string(b"\xff") == '"\ufffd"'


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
