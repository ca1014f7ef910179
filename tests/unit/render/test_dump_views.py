from kinspect.render.dump_views import record_view, show


def test_show_modes():
    assert show(None, "auto") is None
    assert show(b'{"a": 1}', "auto") == {"a": 1}
    assert show(b"123", "auto") == "123" and show(b"123", "json") == 123
    assert show(b"{nope", "auto") == "{nope" and show(b"{nope", "json") == "{nope"
    assert show(b"\xff\x00", "auto") == {"b64": "/wA="}
    assert show(b"\xff\x00", "hex") == "ff00"
    assert show(b"\xff", "text") == "\ufffd"
    assert show(b"\xff", "json") == "\ufffd"


def test_record_views():
    record = {"offset": 3, "timestamp": 10, "key": b"k", "value": None, "key_size": 1,
              "value_size": -1, "sequence": 7, "headers": [{"key": "h", "value": b"\x01"}]}
    assert record_view(record, False, "auto") == {"offset": 3, "timestamp": 10, "key_size": 1,
                                                  "value_size": -1, "sequence": 7,
                                                  "header_keys": ["h"]}
    view = record_view(record, True, "hex")
    assert (view["key"], view["value"], view["headers"]) == ("6b", None,
                                                            [{"key": "h", "value": "01"}])
    decoded = dict(record, decoded={"record_type": 1, "record_name": "OffsetCommit",
                                    "key": {"group": "g"}, "value": None, "tombstone": True})
    view = record_view(decoded, True, "auto")
    assert view["record_name"] == "OffsetCommit" and view["tombstone"] is True
    assert record_view(decoded, True, "text")["key"] == "k"
