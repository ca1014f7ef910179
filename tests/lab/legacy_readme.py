"""pcaps/kafka39-README.md and the section of pcaps/README.md that points to it, written from
the manifests of tests/lab/legacy_recipes.py, so they say how each file was really made."""

from __future__ import annotations

from tests.lab import fixture_readme
from tests.lab.legacy_recipes import LEGACY_BROKER, WARM_UP_GROUP

FILE = "kafka39-README.md"
POINTER_HEADING = "## Captures from Apache Kafka (kafka39-*, kafka41-*)"

INTRO = f"""\
# pcaps/kafka39-* and kafka41-*: real clients against Apache Kafka

Tansu (the broker of the other captures here) does not understand the legacy message formats.
These files come from Apache Kafka itself, run from the Maven Central jars by
`tests/lab/kafka.py`, recorded by `tools/record_legacy_pcaps.py` (recipes in
`tests/lab/legacy_recipes.py`). Nothing is synthesized or edited. Each capture has a
`<name>.kafka-manifest.json` beside it, in the shape of the Tansu captures' manifests (every
value produced, consumed and committed, and the requests per (api_key, api_version) from the
client's own debug log), plus, per client, `expect`: its topic, the topic's config, and the
magic its Produce requests and Fetch responses must carry. (Not `*.manifest.json`: that suffix
marks the Tansu captures that README.md describes and its tests read.)
`tests/integration/test_lab_legacy.py` checks `kinspect decode --json` against them, on these
files and on fresh recordings.

## Regenerating

    sudo python tools/record_legacy_pcaps.py                 # all of them
    sudo python tools/record_legacy_pcaps.py --only NAME     # one: the file name without extension
    python tools/record_legacy_pcaps.py --readme-only        # only this README and README.md's pointer

Root, Java 17 and Maven (the jars are fetched once into ~/.cache/kinspect-lab), plus `ip`,
`tcpdump`, `dumpcap`, `capinfos`, `tshark`, and the `xxhash` package (kafka-python needs it for
lz4 with magic 0). A new recording differs in timestamps, ports and member ids; the manifest,
this README and the pointer section of README.md are rewritten with it.

## How these were recorded

- **Legacy broker**: Apache Kafka 3.9.2 in ZooKeeper mode (a ZooKeeper beside it), one broker,
  {", ".join(f"`{k}={v}`" for k, v in LEGACY_BROKER.items())}: Kafka 3.x keeps magic 0/1 on
  disk only so. Each client has a topic of its own (2 partitions), created before the capture
  with `message.format.version` 0.9.0 (magic 0 on disk) or 0.10.0 (magic 1), and
  `compression.type=producer` (the default), so the wrappers keep the client's codec.
- **What the broker does with the formats**: it stores the topic's magic, converting what a
  client sends (magic 0 → 1 or 1 → 0, decompressing and recompressing the wrappers); magic-0
  compressed wrappers are rewritten even without a conversion, to assign offsets. Fetch v0 and
  v1 can only carry magic 0, so a magic-1 topic is down-converted for them; Fetch v2 and v3
  return what is on disk. Down-converted responses end with Kafka's overflow stub (offset -1, a
  length past the end: `LazyDownConversionRecordsSend`), which a reader must skip as a partial
  trailing message.
- **lz4 and KIP-57**: magic 0 lz4 frames carry the pre-KIP-57 header checksum (a hash of the
  frame magic too, not of the descriptor only): kafka-python writes it for magic 0 (its
  `lz4_encode_old_kafka`, which needs `xxhash`), and so does the broker when it writes magic 0.
  Magic 1 frames have the correct checksum.
- **Clients**: kafka-python with `api_version` pinned: 0.8.2 (Produce v0, Fetch v0, no group
  management: `tests/lab/clients/kafka_python_assigned_client.py` assigns itself the partitions
  and commits with OffsetCommit v1), 0.9 (Produce v1, Fetch v1, JoinGroup v0), 0.10.0 (Produce
  v2, Fetch v2) and 0.10.1 (Produce v2, Fetch v3, JoinGroup v1), `tests/lab/clients/
  kafka_python_client.py` otherwise: one producer per codec, values `<label>-<codec>-<i>`
  (padded with `x` to `--value-size`), no headers (magic 0/1 have none), then a consumer that
  reads everything back, commits synchronously and asks `committed()`. One more 0.10.1 client
  writes to a topic with `message.timestamp.type=LogAppendTime` (magic 1): the broker stamps
  each wrapper with its append time, which Produce v2 responses return (`log_append_time_ms`)
  and which every inner message of a wrapper takes.
- **Before the capture**: the topics are created, and a warm-up group (`{WARM_UP_GROUP}`)
  commits once. In ZooKeeper mode the first FindCoordinator creates `__consumer_offsets`, and
  the controller then sends LeaderAndIsr and UpdateMetadata to its own broker through the
  client listener; the warm-up keeps that traffic, which no client logged, out of the capture.
- **Modern broker**: Apache Kafka 4.1.2, KRaft (combined broker and controller), the lab's
  librdkafka client (`tests/lab/clients/librdkafka_client.py`) with every codec including zstd,
  topic `lab-librdkafka` with 4 partitions created before the capture.
- **Networks and capture**: as for the Tansu captures (README.md): loopback (MTU 65536, one
  segment per message) or two namespaces joined by an MTU 1500 veth with segmentation offload
  off. On the veth the broker runs in its namespace, listening on all of that namespace's
  addresses (Kafka's tools reach it on 127.0.0.1 there) and advertising `198.18.0.1:9092`;
  KRaft's controller listener is `127.0.0.1:9093` in that namespace, never on the veth. The
  capture runs in the clients' namespace, filter `tcp port <broker port>`.

## What a decoder meets here

- Fetch v0 and v1 responses that Kafka down-converted (the 0.8.2 client's, whose topic is magic 1
  on disk) end each partition's records with the overflow stub described above: a partial
  trailing message, reported as info, never a value.
- kafka-python numbers every compressed wrapper 0 (timestamp 0) in its Produce requests. With
  magic 1's relative inner offsets, Kafka's rule (absolute = wrapper offset - last relative
  offset + relative) gives those inner messages offsets -n+1 .. 0; only the broker's numbering,
  in Fetch responses, is meaningful, and it matches the offsets the consumers reported.
- Magic 0 has no timestamps; magic 1 wrappers from the broker carry the largest inner CreateTime.
- The librdkafka consumer closes with a long-poll Fetch still pending: the last Fetch request
  has no response (info), as its own log says (requests sent 3, responses received 2).
- ApiVersions v0 opens each connection of the 0.10.x clients; kafka-python 0.8.2 and 0.9 send none.
- The legacy captures hold no error code at all (the warm-up loaded the group coordinator). In
  the Kafka 4.1.2 capture `__consumer_offsets` is created by the consumer's first FindCoordinator,
  so it meets the coordinator loading: COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS (which ones varies between recordings), then JoinGroup's
  MEMBER_ID_REQUIRED (KIP-394), and retries.

## The files
"""


def _expectations(manifest: dict) -> list[str]:
    lines = []
    for client in manifest["clients"]:
        expect = client.get("expect") or {}
        if "topic" not in expect:
            continue
        config = ", ".join(f"{k}={v}" for k, v in expect["topic_config"].items()) or "defaults"
        pinned = (f"api_version {client['api_version']}" if client.get("api_version")
                  else client["client"])
        lines.append(f"  - {pinned}: topic `{expect['topic']}` ({expect['partitions']} partitions, "
                     f"{config}): Produce requests carry magic {expect['produce_magic']}, Fetch "
                     f"responses magic {expect['fetch_magic']}")
    return lines


def section(manifest: dict) -> str:
    text = fixture_readme._section(manifest).rstrip("\n")
    return "\n".join([text, "- What the traffic must show:", *_expectations(manifest), ""])


def table(manifests: list[dict]) -> str:
    rows = ["| file | broker | clients | network / MTU | format |", "|---|---|---|---|---|"]
    for m in manifests:
        clients = ", ".join(f"{c['client']} {c['api_version']}" if c.get("api_version") else c["client"]
                            for c in m["clients"])
        broker = f"{m['broker']['version']} ({m['broker']['metadata']})"
        rows.append(f"| `{m['file']}` | {broker} | {clients} "
                    f"| {m['capture']['network']} / {m['capture']['mtu']} | {m['file_info']['format']} |")
    return "\n".join(rows) + "\n"


def render(manifests: list[dict]) -> str:
    return INTRO + "\n" + table(manifests) + "\n" + "\n".join(section(m) for m in manifests)


def with_pointer_section(readme: str, manifests: list[dict]) -> str:
    """README.md with its pointer section (the last one) replaced, or appended."""
    head = readme.split(POINTER_HEADING, 1)[0].rstrip("\n")
    pointer = (f"{POINTER_HEADING}\n\n"
               f"Recorded by `tools/record_legacy_pcaps.py` against Apache Kafka 3.9.2 (ZooKeeper mode, "
               f"legacy message formats magic 0/1) and 4.1.2 (KRaft), not Tansu; "
               f"[{FILE}]({FILE}) says exactly how each was made and what it must show.\n\n"
               + table(manifests))
    return (head + "\n\n" if head else "") + pointer
