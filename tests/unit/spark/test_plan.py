import os
import shutil

import pytest

from tests.conftest import PCAPS
from kinspect.spark.plan import (EXCHANGE_COST, Input, NoInputs, Shard, Unit, connection_shard, find_inputs, list_inputs,
                                 plan, searched_directory)

MB = 1 << 20


def test_list_inputs_walks_directories_and_globs_once_each(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.pcap").write_bytes(b"\xd4\xc3\xb2\xa1" + b"x" * 6)  # a pcap by its first bytes
    (tmp_path / "a" / ".hidden").write_bytes(b"x")
    (tmp_path / "two.pcap").write_bytes(b"y" * 3)
    found = list_inputs([str(tmp_path / "a"), str(tmp_path / "*.pcap"), str(tmp_path / "a" / "one.pcap")])
    assert found == [Input(str(tmp_path / "a" / "one.pcap"), 10), Input(str(tmp_path / "two.pcap"), 3)]


def test_list_inputs_names_what_matched_nothing(tmp_path):
    with pytest.raises(NoInputs, match="nothing-here"):
        list_inputs([str(tmp_path / "nothing-here*")])


def test_a_walk_skips_special_files_and_gives_unreadable_entries_their_error(tmp_path):
    """A FIFO (read, it would never end), a socket and a link to a directory above are passed
    over and listed; a link loop and a dangling link are inputs with their error; a name that is
    not UTF-8 is an input like any other."""
    from tests.hostile.inputs_spark import CAPTURES, DANGLING, ESCAPES, FIFO, NOT_UTF8, special_entries_dir
    top = special_entries_dir(tmp_path)
    listing = find_inputs([str(top)])
    assert sorted((os.path.basename(p), kind) for p, kind in listing.skipped) == \
        [("a.sock", "a socket"), (FIFO, "a FIFO"), ("up", "a link to a directory")]
    by_name = {os.fsencode(os.path.basename(f.path)): f for f in listing.inputs}
    assert sorted(by_name) == sorted([*(c.name.encode() for c in CAPTURES), NOT_UTF8, (ESCAPES + ".pcap").encode(),
                                      DANGLING, b"loop"])
    assert by_name[b"loop"].error == "cannot read: Too many levels of symbolic links"
    assert by_name[DANGLING].error == "cannot read: No such file or directory"
    assert by_name[NOT_UTF8].error is None and by_name[NOT_UTF8].size == CAPTURES[0].stat().st_size


def test_a_walk_goes_deeper_than_pythons_recursion_limit(tmp_path):
    """os.walk recursed: 1,500 nested directories ended it with a RecursionError (internal error)."""
    from tests.hostile.inputs_spark import CAPTURES, deep_dir, remove_tree
    top = deep_dir(tmp_path)
    try:
        (found,) = list_inputs([str(top)])
    finally:
        remove_tree(top)  # pytest's own clean-up would recurse
    assert found.path.endswith("/d/" + CAPTURES[0].name) and found.path.count("/d") == 1500 and found.error is None


def test_special_files_named_or_globbed_alone_are_refused(tmp_path):
    os.mkfifo(tmp_path / "x.fifo")
    with pytest.raises(NoInputs, match="x.fifo: a FIFO, not a regular file"):
        find_inputs([str(tmp_path / "x.fifo")])
    with pytest.raises(NoInputs, match="no capture, only files skipped \\(a FIFO\\)"):
        find_inputs([str(tmp_path / "*.fifo")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoInputs, match="a directory holding no file"):
        find_inputs([str(tmp_path / "empty")])


def test_the_directory_a_glob_reads():
    assert searched_directory("*.pcap") == "."
    assert searched_directory("/srv/caps/*/broker-?.pcap") == "/srv/caps"
    assert searched_directory("/*.pcap") == "/"
    assert searched_directory("no-such-file") is None


def _first_fit_by_scan(files, target):
    """First-fit decreasing as written plainly: each file into the first bin it fits in."""
    bins = []
    for f in sorted(files, key=lambda f: f.size, reverse=True):
        for b in bins:
            if b[0] + f.size <= target:
                b[0] += f.size
                b[1].append(f)
                break
        else:
            bins.append([f.size, [f]])
    return [Unit(tuple(b[1])) for b in bins]


def test_packing_is_first_fit_decreasing():
    import random
    rnd = random.Random(30)
    for _ in range(300):
        target = rnd.randint(10, 1000)
        files = [Input(f"f{i}", rnd.randint(0, target - 1)) for i in range(rnd.randint(0, 200))]
        assert plan(files, cores=1, target=target) == sorted(_first_fit_by_scan(files, target),
                                                             key=lambda u: u.weight, reverse=True)


def test_packing_200000_files_that_fill_a_bin_each_ends():
    """--task-mb 1 over files of 600 KB (sparse files cost no disk): a scan of the bins for each
    file took 13 s for 20,000 of them, and would take over 20 minutes for 200,000."""
    import subprocess
    import sys
    script = ("from kinspect.spark.plan import Input, plan\n"
              "print(len(plan([Input(f'f{i}', 600_000 + i) for i in range(200_000)], cores=2, target=1 << 20)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "200000", done.stderr


def test_small_files_pack_to_target_largest_first():
    files = [Input(f"f{i}", size * MB) for i, size in enumerate([100, 60, 200, 50, 30, 120])]
    units = plan(files, cores=2, target=256 * MB)
    packed = sorted(sorted(f.path for f in u.files) for u in units)
    # first-fit decreasing: 200+50, 120+100+30, 60
    assert packed == [["f0", "f4", "f5"], ["f1"], ["f2", "f3"]]
    assert all(sum(f.size for f in u.files) <= 256 * MB for u in units)
    assert [u.weight for u in units] == sorted((u.weight for u in units), reverse=True)
    assert sorted(f.path for u in units for f in u.files) == sorted(f.path for f in files)


def test_a_file_far_above_the_median_is_split_into_shards():
    files = [Input("big", 2000 * MB)] + [Input(f"s{i}", 10 * MB) for i in range(5)]
    units = plan(files, cores=4, target=256 * MB)
    big = [u for u in units if u.files[0].path == "big"]
    assert [(u.shard, u.shards) for u in big] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert units[:4] == big  # largest first: 500 MB each
    assert len(units) == 5  # the five small files packed into one unit


def test_a_lone_big_file_uses_every_core_but_small_ones_are_never_split():
    assert len(plan([Input("one", 1000 * MB)], cores=2)) == 2
    assert len(plan([Input("one", 1000 * MB)], cores=1)) == 1
    assert plan([Input("one", 100 * MB)], cores=8) == [Unit((Input("one", 100 * MB),))]
    # above target but not far above the median, with more files than cores: whole files
    same = [Input(f"f{i}", 300 * MB) for i in range(4)]
    assert all(u.shards == 1 and len(u.files) == 1 for u in plan(same, cores=2))


def test_connection_shard_is_symmetric_and_stable():
    conn, reverse = "10.0.0.5:51234-10.0.0.9:9092", "10.0.0.9:9092-10.0.0.5:51234"
    assert connection_shard(conn, 7) == connection_shard(reverse, 7)
    v6 = "[::1]:40000-[::1]:9092"
    assert connection_shard(v6, 5) == connection_shard("[::1]:9092-[::1]:40000", 5)
    assert connection_shard("", 4) == 0 and connection_shard(conn, 1) == 0
    # CRC-32 of the sorted ends: the same in every process, whatever PYTHONHASHSEED
    assert connection_shard(conn, 1000) == \
        __import__("zlib").crc32(b"10.0.0.5:51234|10.0.0.9:9092") % 1000
    spread = {connection_shard(f"10.0.0.5:{p}-10.0.0.9:9092", 4) for p in range(40000, 40100)}
    assert spread == {0, 1, 2, 3}


def _exchange(conn: str, request: int, response: int | None) -> dict:
    return {"type": "exchange", "conn": conn, "request_size": request, "response_size": response}


def test_shards_deal_each_exchange_to_the_least_loaded_alike():
    """Five busy connections among light ones: dealt by exchange, the two shards' work differs by
    at most one exchange's, where a hash of connections can give one shard three of the five."""
    records = []
    for n in range(200):
        records.append(_exchange(f"10.0.0.5:{40000 + n % 5}-10.0.0.9:9092", 60_000, 60))
        if n % 4 == 0:
            records.append(_exchange(f"10.0.0.5:{41000 + n}-10.0.0.9:9092", 100, None))
            records.append({"type": "notice", "conn": f"10.0.0.5:{41000 + n}-10.0.0.9:9092"})
    shards = [Shard(i, 2) for i in range(2)]
    given = [[r for r in records if shard(r)] for shard in shards]
    assert shards[0].dealt == shards[1].dealt  # every shard dealt alike
    assert sorted(map(id, given[0] + given[1])) == sorted(map(id, records))  # each record once
    work = [sum(r["request_size"] + (r["response_size"] or 0) + EXCHANGE_COST for r in part if r["type"] == "exchange")
            for part in given]
    assert abs(work[0] - work[1]) <= 60_060 + EXCHANGE_COST
    for part, i in zip(given, range(2)):  # notices by their connection's hash
        assert all(connection_shard(r["conn"], 2) == i for r in part if r["type"] == "notice")


def test_files_found_in_a_directory_are_recognised_by_content(tmp_path):
    """One rule with decode and validate: what a directory holds that is no capture is skipped
    and counted (`kinspect spark pcaps` gave 18 'not a pcap' errors, one per manifest)."""
    shutil.copy(PCAPS / "librdkafka-mtu1500.pcap", tmp_path / "a.pcap")
    shutil.copy(PCAPS / "librdkafka-mtu1500.manifest.json", tmp_path / "a.manifest.json")
    (tmp_path / "notes.txt").write_text("not a capture")
    listing = find_inputs([str(tmp_path)])
    assert [os.path.basename(f.path) for f in listing.inputs] == ["a.pcap"]
    assert sorted((os.path.basename(p), why) for p, why in listing.skipped) == [
        ("a.manifest.json", "not a capture"), ("notes.txt", "not a capture")]
    named = find_inputs([str(tmp_path / "notes.txt")])  # named: the files row says what it is not
    assert [os.path.basename(f.path) for f in named.inputs] == ["notes.txt"]
