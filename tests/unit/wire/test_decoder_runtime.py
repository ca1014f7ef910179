from kinspect.wire.decoder_runtime import RUNTIME, Fault, run_decoder, short_read, uvarint


def _nested_fault(buf, pos, end, o, c, path):
    o["first"] = 1
    try:
        short_read(4, 1, "leader_id", 7)
    except Fault as fault:
        fault.trail.append("partitions[2]")
        raise


def test_a_fault_becomes_a_problem_with_its_field_path_and_absolute_offset():
    body, problems = run_decoder(_nested_fault, b"\x00" * 8, 100, "FetchResponse v4", False)
    assert body == {"first": 1}
    [problem] = problems
    assert problem.path == "FetchResponse v4 → partitions[2] → leader_id"
    assert (problem.what, problem.offset, problem.check) == ("truncated: need 4 bytes, 1 left", 107,
                                                             "body_structure")


def test_a_decoder_bug_costs_one_body():
    def broken(buf, pos, end, o, c, path):
        raise KeyError("x")
    body, [problem] = run_decoder(broken, b"ab", 10, "P", False, start=1)
    assert body == {} and problem.check == "decoder_error" and problem.offset == 11


def test_bytes_left_after_the_body_are_a_warning():
    def two(buf, pos, end, o, c, path):
        return pos + 2
    _, [problem] = run_decoder(two, b"abcde", 0, "P", False)
    assert (problem.check, problem.severity, problem.offset) == ("trailing_bytes", "warning", 2)


def test_uvarint_and_the_names_generated_code_calls():
    assert uvarint(b"\x96\x01", 0, 2, "f") == (150, 2)
    assert RUNTIME["_short"] is short_read and RUNTIME["_Fault"] is Fault
