"""The lab's recipes: which broker, network, capture tool, link type and clients make each capture.

record(recipe, directory) runs one recipe end to end, with a fresh Tansu broker, and writes
<name>.<pcap|pcapng> and <name>.manifest.json beside it. tools/record_pcaps.py runs them all
into pcaps/; the lab tests run them into a temporary directory.
"""

from __future__ import annotations

import json
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tests.lab import capinfo
from tests.lab.netns import lab_network
from tests.lab.recorder import PacketsDropped, Recorder
from tests.lab.runner import run_client
from tests.lab.tansu import TansuBroker, tansu_version

ALL_CODECS = "none,gzip,snappy,lz4,zstd"


@dataclass(frozen=True)
class ClientRun:
    """One client script run. delivers/consumes: what Tansu is expected to let it do; a run
    that stops matching (a Tansu fix, say) fails the lab tests, so the README gets updated."""

    module: str                 # under tests.lab.clients
    args: tuple[str, ...] = ()
    delivers: bool = True
    consumes: bool = True


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    network: str                # "loopback" or "veth" (two namespaces, MTU 1500)
    tool: str                   # "tcpdump" or "dumpcap"
    fmt: str                    # "pcap" or "pcapng"
    clients: tuple[ClientRun, ...]
    linktype: str | None = None  # None: the interface's own; "LINUX_SLL2": capture on "any"

    @property
    def encapsulation(self) -> str:
        """capinfos' name for the link type: lo and veth give Ethernet on Linux."""
        return "linux-sll2" if self.linktype == "LINUX_SLL2" else "ether"

    @property
    def filename(self) -> str:
        return f"{self.name}.{self.fmt}"


RECIPES: tuple[Recipe, ...] = (
    Recipe("librdkafka-produce-consume",
           "librdkafka producers, one per codec (none, gzip, snappy, lz4, zstd), then a consumer "
           "group that reads everything back and commits",
           "loopback", "dumpcap", "pcapng",
           (ClientRun("librdkafka_client", ("--codecs", ALL_CODECS)),)),
    Recipe("librdkafka-mtu1500",
           "librdkafka over a 1500-byte MTU veth: 700-byte values, so Produce requests and Fetch "
           "responses span several TCP segments; committing consumer group",
           "veth", "tcpdump", "pcap",
           (ClientRun("librdkafka_client", ("--codecs", "none,zstd", "--count", "8",
                                            "--value-size", "700")),)),
    Recipe("kafka-python-sll2",
           "kafka-python producers, one per codec, and a committing consumer group, captured on "
           "'any' as Linux cooked v2 over the MTU 1500 veth",
           "veth", "tcpdump", "pcap",
           (ClientRun("kafka_python_client", ("--codecs", ALL_CODECS, "--value-size", "300")),),
           linktype="LINUX_SLL2"),
    Recipe("aiokafka-mtu1500",
           "aiokafka producers, one per codec, and a committing consumer group over the MTU 1500 "
           "veth, some values large enough to span segments",
           "veth", "dumpcap", "pcapng",
           (ClientRun("aiokafka_client", ("--codecs", ALL_CODECS, "--count", "4",
                                          "--value-size", "1800")),)),
    Recipe("kafka-python-legacy-rejected",
           "kafka-python pinned to api_version 0.9 (Produce v1, magic 0) and 0.10.1 (Produce v2, "
           "magic 1), uncompressed and gzip; Tansu rejects legacy message sets",
           "loopback", "tcpdump", "pcap",
           (ClientRun("kafka_python_client", ("--api-version", "0.9", "--label", "kafka-python-0.9",
                                              "--codecs", "none,gzip", "--count", "2",
                                              "--no-consume"), delivers=False, consumes=False),
            ClientRun("kafka_python_client", ("--api-version", "0.10.1",
                                              "--label", "kafka-python-0.10.1",
                                              "--codecs", "none,gzip", "--count", "2",
                                              "--no-consume"), delivers=False, consumes=False))),
    Recipe("kafka-python-legacy-groups",
           "modern kafka-python producers, then consumer groups pinned to api_version 0.10.1 "
           "(JoinGroup v1, Fetch v3, OffsetCommit v2: reads all and commits) and 0.9 (JoinGroup "
           "v0, ListOffsets v0, whose response from Tansu is malformed, so that consumer gives "
           "up); Linux cooked v2 in pcapng over the MTU 1500 veth",
           "veth", "dumpcap", "pcapng",
           (ClientRun("kafka_python_client", ("--consumer-api-version", "0.10.1",
                                              "--label", "kafka-python-consumer-0.10.1",
                                              "--codecs", "none,gzip", "--count", "4",
                                              "--value-size", "400")),
            ClientRun("kafka_python_client", ("--consumer-api-version", "0.9",
                                              "--label", "kafka-python-consumer-0.9",
                                              "--codecs", "none", "--count", "3"),
                      consumes=False)),
           linktype="LINUX_SLL2"),
)

BY_NAME = {r.name: r for r in RECIPES}


def _tool_version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def _loopback_mtu() -> int:
    return int(Path("/sys/class/net/lo/mtu").read_text())


def record(recipe: Recipe, directory: Path, log_dir: Path | None = None, attempts: int = 3) -> Path:
    """Record one capture; return the path of its manifest. A capture the kernel dropped
    packets from is incomplete: it is thrown away and recorded again."""
    for attempt in range(1, attempts + 1):
        try:
            return _record_once(recipe, directory, log_dir)
        except PacketsDropped:
            if attempt == attempts:
                raise


def _record_once(recipe: Recipe, directory: Path, log_dir: Path | None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    capture = directory / recipe.filename
    capture.unlink(missing_ok=True)
    log_dir = log_dir or directory / f"{recipe.name}.logs"
    with ExitStack() as stack:
        if recipe.network == "veth":
            net = stack.enter_context(lab_network())
            broker = TansuBroker(host=net.broker.address, exec_prefix=net.broker.exec_prefix())
            client_prefix, interface, mtu = net.client.exec_prefix(), net.client.interface, net.mtu
        elif recipe.network == "loopback":
            broker = TansuBroker(host="127.0.0.1")
            client_prefix, interface, mtu = [], "lo", _loopback_mtu()
        else:
            raise ValueError(f"unknown network {recipe.network!r}")
        stack.enter_context(broker)
        if recipe.linktype == "LINUX_SLL2":
            interface = "any"
        recorder = Recorder(capture, interface, f"tcp port {broker.port}", tool=recipe.tool,
                            fmt=recipe.fmt, linktype=recipe.linktype, exec_prefix=client_prefix)
        with recorder:
            clients = []
            for i, run in enumerate(recipe.clients):
                client = run_client(run.module, ["--bootstrap", broker.bootstrap, *run.args],
                                    exec_prefix=client_prefix,
                                    log_path=log_dir / f"{i}-{run.module}.log")
                client["expect"] = {"delivered": run.delivers, "consumed": run.consumes}
                clients.append(client)
    manifest = {
        "file": recipe.filename,
        "summary": recipe.summary,
        "command": f"python tools/record_pcaps.py --only {recipe.name}",
        "broker": {"name": "tansu", "version": tansu_version(), "bootstrap": broker.bootstrap,
                   "storage": "memory://tansu/"},
        "capture": {"tool": _tool_version(recipe.tool),
                    "argv": [recipe.filename if a == str(capture) else a for a in recorder.argv()],
                    "network": recipe.network, "interface": interface, "mtu": mtu,
                    "bpf": recorder.bpf, "format": recipe.fmt, "encapsulation": recipe.encapsulation},
        "file_info": capinfo.describe(capture).to_dict(),
        "clients": clients,
    }
    manifest_path = directory / f"{recipe.name}.manifest.json"
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest_path
