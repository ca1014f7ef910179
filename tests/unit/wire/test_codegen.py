import pytest

from kinspect.wire.codegen import Generator, compile_decoder, generate
from kinspect.wire.decoder_runtime import run_decoder
from kinspect.wire.encode import encode_body
from kinspect.wire.layouts import layout
from kinspect.wire.messages import decode_body

METADATA = 3
TOPIC_ID = bytes(range(16))
RESPONSE = {"throttle_time_ms": 0, "brokers": [], "cluster_id": "c", "controller_id": 1,
            "topics": [{"error_code": 0, "name": "t", "topic_id": "00010203-0405-0607-0809-0a0b0c0d0e0f",
                        "is_internal": False, "partitions": [], "topic_authorized_operations": 0}]}


def test_compile_decoder_decodes_as_decode_body():
    body = encode_body(METADATA, 12, "response", RESPONSE)
    decode = compile_decoder(layout(METADATA, 12, "response"), "<kinspect test>")
    assert run_decoder(decode, body, 0, "MetadataResponse v12", False) == \
        decode_body(METADATA, 12, "response", body)
    assert decode.__code__.co_filename == "<kinspect test>"


def test_runtime_replaces_the_helpers_of_the_generated_code():
    body = encode_body(METADATA, 12, "response", RESPONSE)
    decode = compile_decoder(layout(METADATA, 12, "response"), "<kinspect test>",
                             runtime={"_uuid": lambda raw: raw.hex().upper()})
    value, problems = run_decoder(decode, body, 0, "MetadataResponse v12", False)
    assert problems == []
    assert value["topics"][0]["topic_id"] == TOPIC_ID.hex().upper()


def test_a_generator_subclass_writes_the_source():
    class Marked(Generator):
        def function(self, fields):
            self.lines.append("# marked")
            return super().function(fields)

    source, names = generate(layout(METADATA, 12, "response"), Marked)
    assert source.startswith("# marked\ndef decode(buf, pos, end, o, c, path):")
    assert source == "# marked\n" + generate(layout(METADATA, 12, "response"))[0]
    assert names


@pytest.mark.parametrize("version", [3, 8, 9, 10, 11])
def test_a_record_sets_problem_names_every_array_index_on_its_way(version):
    """The path of a record set's problem is built where the set is met (one f-string): the
    indices of every array on the way, and the tagged-field-less nesting, are those of that set."""
    garbage = b"\x00" * 12 + b"\x00\x00\x00\x05" + b"\x00" * 9  # a batch header cut short
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": f"t{t}", "partition_data": [{"index": p, "records": garbage if (t, p) == (1, 2) else None}
                                             for p in range(3)]}
        for t in range(2)]}
    decoded, problems = decode_body(0, version, "request", encode_body(0, version, "request", body))
    assert problems
    assert {p.path.split(" → batch")[0] for p in problems} == {
        f"ProduceRequest v{version} → topic_data[1] → partition_data[2] → records"}
    assert decoded["topic_data"][1]["partition_data"][1]["records"] is None
