"""kinspect run as a child process by the lab tests (sniff, proxy): stdout is read as it comes (a
full pipe would stall the child), stderr is kept line by line, and start() returns once a line
says the child is ready."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KINSPECT = [sys.executable, "-m", "kinspect"]


class KinspectChild:
    def __init__(self, command: str, args, ready: re.Pattern, env=None, prefix=()):
        self.argv = [*prefix, *KINSPECT, command, *args]
        self.env = {**os.environ, **(env or {})}
        self.ready = ready
        self.ready_match: re.Match | None = None
        self.stderr: list[str] = []

    def start(self, timeout=20):
        self.process = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        started = threading.Event()
        self.out: list[str] = []
        self._drain = threading.Thread(target=lambda: self.out.append(self.process.stdout.read()),
                                       daemon=True)
        self._drain.start()

        def pump():
            for line in self.process.stderr:
                self.stderr.append(line.rstrip())
                m = self.ready.search(line)
                if m and self.ready_match is None:
                    self.ready_match = m
                    started.set()
            started.set()  # it ended: start() reports what it said

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        assert started.wait(timeout) and self.process.poll() is None, "\n".join(self.stderr)
        return self

    def stop(self, sig=signal.SIGINT, timeout=60):
        self.process.send_signal(sig)
        return self.wait(timeout)

    def wait(self, timeout=60):
        self.process.wait(timeout)
        self._drain.join(10)
        self._pump.join(5)
        return self.process.returncode, "".join(self.out)

    def log_has(self, pattern: str, timeout: float = 10) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for line in self.stderr):
                return True
            time.sleep(0.05)
        return False


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]
