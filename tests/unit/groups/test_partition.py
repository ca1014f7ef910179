import shutil
import subprocess

import pytest

from kinspect.groups.partition import java_string_hash, kafka_abs, partition_for

NAMES = ["my-group", "group-classic", "", "é", "grüße-Gruppe", "组-消费者", "😀", "𝄞music𝄞",
         "a😀b😀c" * 7, "polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES", "x" * 300]

# Java itself, reading the names as UTF-8 lines so no locale stands between them and String.
JAVA = """
import java.nio.charset.StandardCharsets; import java.nio.file.*;
public class Hash { public static void main(String[] a) throws Exception {
  for (String s : Files.readAllLines(Paths.get(a[0]), StandardCharsets.UTF_8)) {
    int h = s.hashCode(); System.out.println(h + " " + (h == Integer.MIN_VALUE ? 0 : Math.abs(h)) % 50);
} } }
"""


@pytest.fixture(scope="module")
def java_hashes(tmp_path_factory):
    if shutil.which("javac") is None:
        pytest.fail("javac is not installed: the README's test command installs a JDK")
    work = tmp_path_factory.mktemp("javahash")
    (work / "Hash.java").write_text(JAVA)
    subprocess.run(["javac", "Hash.java"], cwd=work, check=True, capture_output=True)
    (work / "names.txt").write_text("".join(n + "\n" for n in NAMES), encoding="utf-8")
    done = subprocess.run(["java", "-cp", str(work), "Hash", str(work / "names.txt")],
                          capture_output=True, text=True, check=True)
    return [tuple(map(int, line.split())) for line in done.stdout.splitlines()]


def test_hash_and_partition_agree_with_java(java_hashes):
    assert len(java_hashes) == len(NAMES)
    for name, (java_hash, java_partition) in zip(NAMES, java_hashes):
        assert java_string_hash(name) == java_hash, name
        assert partition_for(name) == java_partition, name


def test_astral_characters_count_as_two_utf16_units():
    # U+1F600 is the surrogate pair D83D DE00 in Java: 31 * 0xD83D + 0xDE00
    assert java_string_hash("😀") == 31 * 0xD83D + 0xDE00


def test_minimum_int_maps_to_partition_zero_as_kafka_utils_abs_does():
    assert java_string_hash("polygenelubricants") == -2**31
    assert kafka_abs(-2**31) == 0 and kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 7) == 0


def test_the_lab_brokers_groups_are_where_kafka_put_them():
    # partitions that Apache Kafka 4.1 and 3.9 wrote these groups to (samples/, kafkafun)
    assert partition_for("group-classic") == 24
    assert partition_for("group-consumer") == 6
    assert partition_for("group-txn") == 30
    assert partition_for("third") == 39
    assert partition_for("my-first-app") == 13


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        partition_for("g", 0)
    assert partition_for("g", 1) == 0
