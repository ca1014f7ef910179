from kinspect.wire.layouts import snake


def test_snake_case_names():
    assert snake("TopicData") == "topic_data"
    assert snake("ThrottleTimeMs") == "throttle_time_ms"
    assert snake("ErrorCode") == "error_code"
    assert snake("isKRaftController") == "is_k_raft_controller"  # as kio spells it
    assert snake("Enable2Pc") == "enable2_pc"
