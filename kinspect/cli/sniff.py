"""kinspect sniff: live Kafka traffic from network interfaces, decoded as it happens.

Thin: a live packet source (capture/live.py) feeds pipeline.DecodeRun, the one decoding path
decode uses, and live/loop.py's loop finishes its records; the lines, JSON, filters and summary
are decode's (cli/exchanges.py); the dashboard and metrics endpoint are live/'s.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from kinspect.cli.exchanges import (emit, filter_options, port_options, print_summary, report_options,
                                    stream_bound_options)
from kinspect.cli.keylog import keylog_counts, keylog_news, keylog_option, keylog_warnings
from kinspect.cli.limits import limit_options
from kinspect.cli.options import rotation_options, show_secrets_option
from kinspect.cli.schemas import open_schemas, schema_options, schema_stage, write_notices
from kinspect.cli.output import Output, output_options
from kinspect.cli.overlap import REFUSED, create_output, refuse_writing_over_inputs
from kinspect.decode.filters import ExchangeFilter
from kinspect.limits import Limits
from kinspect.decode.finish import JSON, RECORD, SUMMARY
from kinspect.decode.pipeline import DecodeRun
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE, EXIT_USAGE
from kinspect.decode.summary import Summary
from kinspect.render.safe import path_text

PENDING_TIMEOUT = 60.0   # Kafka's request.timeout.ms is 30 s; a JoinGroup may wait longer
IDLE_TIMEOUT = 600.0     # the broker's connections.max.idle.ms is 9 minutes
STATS_EVERY = 1.0        # seconds between reads of the kernel's drop counters

EPILOG = """\b
Examples:
  sudo kinspect sniff lo
  sudo kinspect sniff any --port 19092 --errors --min-latency-ms 50
  sudo kinspect sniff eth0 --json | jq 'select(.api_name == "Produce")'
  sudo kinspect sniff lo --live --metrics-port 9464
  sudo kinspect sniff eth0 --duration 60 --write bug.pcapng --summary
  sudo kinspect sniff eth0 --write ring.pcapng --rotate-mb 100 --keep 10   # ring_00001.pcapng, ...
  kinspect sniff --backend dumpcap eth0       # no root: dumpcap holds the capabilities

\b
Backends: ring (AF_PACKET TPACKET_V3 in this process; needs CAP_NET_RAW, CAP_NET_ADMIN),
dumpcap or tcpdump (a child process does the capture). auto: the ring when permitted, else
dumpcap, else tcpdump. Kernel drops are counted every second (dumpcap: when it stops) and
TCP gaps as they happen; both are shown live, in the summary, and warned about. A line comes
within ~20 ms of its response with ring, ~1 ms with tcpdump; dumpcap's libpcap hands packets
over up to 250 ms late when traffic is light (a fixed timeout dumpcap has no option for).

\b
Exit codes: 0 fine (Ctrl-C, SIGTERM, --count and --duration end a capture normally);
1 packets were dropped, or no Kafka traffic was seen (or with --strict, a problem in an
exchange); 2 usage error (an unknown interface, a filter that does not compile); 3 the
capture could not start (no permission, no backend), or a rotated --write file could not be
written (it stopped there); 4 internal error; 130 a second Ctrl-C.
"""


@click.command(epilog=EPILOG)
@click.argument("interfaces", nargs=-1, required=True, metavar="INTERFACE...")
@click.option("--backend", type=click.Choice(["auto", "ring", "dumpcap", "tcpdump"]), default="auto",
              show_default=True, help="How packets are captured (see below).")
@click.option("--filter", "bpf", metavar="BPF", help="Capture filter (libpcap syntax); replaces the built one "
              "(every TCP packet, or only the Kafka ports with --no-heuristic).")
@click.option("--buffer-mb", type=click.IntRange(2, 4096), default=32, show_default=True,
              help="Kernel capture buffer (the ring, or the child's -B), MiB.")
@port_options
@filter_options
@report_options("At the end: per-API counts, latency p50/p99/max, bytes, errors.")
@click.option("--live", "dashboard", is_flag=True,
              help="A dashboard refreshed 4 times a second (requests/s, latency, errors, top clients and "
                   "topics, in flight, drops) instead of the lines on the terminal.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve the live figures for Prometheus "
              "on this port (http://HOST:PORT/metrics).")
@click.option("--metrics-address", default="", help="Address the metrics endpoint binds (default: all).")
@click.option("--write", "write_path", type=click.Path(dir_okay=False, writable=True),
              help="Keep the captured packets in this pcapng file (with a rotation: in files named after it).")
@rotation_options
@click.option("--count", type=click.IntRange(1), help="Stop after this many exchanges shown (after filters).")
@click.option("--duration", type=click.FloatRange(0, min_open=True), help="Stop after this many seconds.")
@click.option("--pending-timeout", type=click.FloatRange(0, min_open=True), default=PENDING_TIMEOUT,
              show_default=True, help="Seconds a request waits for its response before it is shown "
                                      "with \"no response\".")
@click.option("--idle-timeout", type=click.FloatRange(0, min_open=True), default=IDLE_TIMEOUT,
              show_default=True, help="Seconds of silence after which a connection is forgotten.")
@stream_bound_options
@schema_options
@show_secrets_option
@keylog_option(must_exist=False)
@limit_options
@output_options
def sniff(interfaces, backend, bpf, buffer_mb, ports, no_heuristic, keep: ExchangeFilter, summary, verbose,
          strict, dashboard, metrics_port, metrics_address, write_path, rotation, count, duration, pending_timeout,
          idle_timeout, max_frame, max_connections, schema_sources, schemas_topic, raw_values, show_secrets, keylog,
          out: Output, limits: Limits):
    """Decode live Kafka traffic on network interfaces (any included), as decode does captures.

    Exchanges are printed as their responses complete, or with "no response" after
    --pending-timeout. Ctrl-C, SIGTERM, --count or --duration end the capture; the summary
    and the drop counts follow.
    """
    from kinspect.capture.live import LiveError, build_filter, open_live
    from kinspect.live.loop import LiveLoop

    if rotation is not None and write_path is None:
        raise click.UsageError("--rotate-mb and --rotate-seconds need --write PATH: they rotate its files")
    interfaces = list(dict.fromkeys(interfaces))
    keylogs = keylog.paths if keylog is not None else []
    for line in keylog_warnings(keylog):
        out.warn(line)
    counts = keylog_counts(keylog)
    refuse_writing_over_inputs(keylogs, {"--write": write_path})
    recording = _recording(write_path, rotation, keylogs)
    kafka_ports = set(ports) | {9092}
    expression = build_filter(kafka_ports, not no_heuristic, bpf)
    try:
        source = open_live(interfaces, backend, expression, buffer_mb)
    except LiveError as e:
        if recording is not None:
            recording.discard()
        out.warn(f"kinspect: {e}")
        sys.exit(EXIT_USAGE if e.asked else EXIT_UNREADABLE)
    if recording is not None:
        recording.source = source
        source = recording
    out.warn(f"kinspect: capturing on {', '.join(interfaces)} with {source.backend}, filter {expression!r}")
    if source.backend == "dumpcap" and backend == "auto":
        from kinspect.capture.live import DUMPCAP_DELAY_NOTE
        out.warn(f"kinspect: note: {DUMPCAP_DELAY_NOTE}")
    schemas = stage = None
    if not raw_values and not summary:
        schemas, _ = open_schemas(schema_sources, schemas_topic, limits, out)  # a source that fails was told
        stage = schema_stage(schemas, schemas_topic, None, show_secrets, None, out, {})
    loop = LiveLoop()
    session = _Session(source, loop, out, duration)
    run = DecodeRun(source, ports=kafka_ports, heuristic=not no_heuristic, max_frame=max_frame, limits=limits,
                    max_connections=max_connections, show_secrets=show_secrets,
                    pending_timeout=pending_timeout, idle_timeout=idle_timeout, on_tick=session.tick,
                    keylog=keylog)  # its files are read again when a connection's keys are missing
    session.run = run
    if metrics_port is not None:
        try:
            loop.serve_metrics(metrics_port, metrics_address)
        except ImportError:
            source.close()
            out.warn("kinspect: --metrics-port needs prometheus_client: pip install prometheus_client")
            sys.exit(EXIT_USAGE)
        except OSError as e:
            source.close()
            out.warn(f"kinspect: --metrics-port {metrics_port}: {e.strerror or e}; choose another port")
            sys.exit(EXIT_USAGE)
    mode = SUMMARY if summary else JSON if out.as_json else RECORD
    if dashboard:
        console = out.console if out.interactive else out.err
        loop.dashboard(console, title=f"{', '.join(interfaces)} ({source.backend})")
    totals = Summary()
    # lines go out as they come; the dashboard takes the terminal's place when there is one
    lines = not (loop.board is not None and out.interactive)
    write = None if out.interactive else out.stream.write
    session.install_signals()
    from kinspect.capture.write import WriteFailed
    failed = None
    try:
        with loop, source:
            any_problems = loop.run(run, lambda output: emit(out, output, mode, totals, lines, verbose, write),
                                    keep=keep, mode=mode, count=count, stages=(stage,) if stage else ())
            session.final(mode, summary)
    except WriteFailed as e:
        failed, any_problems = e, False
    finally:
        session.restore_signals()
    if summary:
        print_summary(out, totals)
    if schemas is not None:
        write_notices(schemas, None, out)
    exit_code = EXIT_OK
    dropped = session.report(summary)
    if rotation is not None:
        out.warn(f"kinspect: {_rotated(recording)}")
    if failed is not None:
        out.warn(f"kinspect: --write: cannot write {path_text(failed.path)}: {failed.reason}; the capture stopped "
                 f"there")
    if dropped:
        exit_code = EXIT_PROBLEMS
    if run.kafka_connections == 0:
        out.warn(f"kinspect: no Kafka traffic seen in {run.packets} packets ({run.tcp_packets} TCP). If the broker "
                 f"listens on another port, try --port N.")
        exit_code = EXIT_PROBLEMS
    for problem in source.problems:
        out.warn(f"kinspect: {problem}")
    for line in keylog_news(run.keylog, counts, "the capture"):
        out.warn(line)
    if strict and any_problems:
        exit_code = EXIT_PROBLEMS
    sys.exit(EXIT_UNREADABLE if failed is not None else exit_code)


def _recording(write_path, rotation: dict | None, keylogs: list):
    """What keeps the packets for --write (None without it), its first file opened before the capture
    starts (a path that cannot be written is a usage error then); its source is set once there is one."""
    if write_path is None:
        return None
    from kinspect.capture.write import Recording, RotatingRecording, WriteFailed, rotation_number
    if rotation is None:
        return Recording(None, create_output(write_path, "--write", keylogs))
    directory = os.path.realpath(os.path.dirname(os.path.abspath(write_path)))
    if not os.path.isdir(directory):
        raise click.UsageError(f"--write {path_text(write_path)}: no directory {path_text(directory)} to write the "
                               f"rotation's files in")
    for path in keylogs:  # one not made yet must not be a name the rotation takes either
        if os.path.realpath(os.path.dirname(os.path.abspath(path))) == directory and \
                rotation_number(write_path, path) is not None:
            raise click.UsageError(f"--keylog {path_text(path)} is a name of the --write rotation: {REFUSED}")
    opened = []

    def opener(name):  # the first file's trouble is a usage error; a later one's stops the capture
        try:
            file = create_output(name, "--write", keylogs)
        except click.UsageError as e:
            if not opened:
                raise
            raise WriteFailed(name, e.message) from None
        opened.append(name)
        return file
    return RotatingRecording(None, write_path, **rotation, opener=opener)


def _rotated(recording) -> str:
    """The line that says which files a rotation wrote and kept."""
    kept = recording.files
    if not kept:
        return f"--write: no file kept of the {recording.published} written"
    names = os.path.basename(kept[0]) + ("" if len(kept) == 1 else f" to {os.path.basename(kept[-1])}")
    where = path_text(os.path.dirname(kept[0]) or ".")
    return f"--write: {recording.published} files written by rotation; kept {len(kept)}, {names} in {where}"


class _Session:
    """What happens on the pipeline's ticks and on signals: the kernel's counters once a second,
    drop warnings, the dashboard, --duration; Ctrl-C and SIGTERM stop the source cleanly."""

    def __init__(self, source, loop, out: Output, duration: float | None):
        self.source, self.loop, self.stats, self.out = source, loop, loop.stats, out
        self.run: DecodeRun | None = None
        self.started = time.monotonic()
        self.deadline = None if duration is None else self.started + duration
        self.next_stats = 0.0
        self.dropped = 0      # the kernel's drops as last read
        self.received = None
        self.signals = 0
        self._previous: dict = {}

    def install_signals(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore_signals(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum, frame) -> None:
        self.signals += 1
        if self.signals > 1:  # a second Ctrl-C: stop now, without the summary
            raise KeyboardInterrupt
        self.source.stop()

    def tick(self, now: float) -> None:
        clock = time.monotonic()
        if self.deadline is not None and clock >= self.deadline:
            self.source.stop()
        if clock >= self.next_stats:
            self.next_stats = clock + STATS_EVERY
            self._read_counters()
        self.loop.refresh()

    def _read_counters(self) -> None:
        counters = self.source.statistics()
        run = self.run
        self.stats.set_capture(packets=run.packets, received=counters.get("received"),
                               dropped=counters.get("dropped"), in_flight=run.session.in_flight())
        dropped = counters.get("dropped")
        self.received = counters.get("received")
        if dropped is not None and dropped > self.dropped:
            more = dropped - self.dropped
            self.dropped = dropped
            self.out.warn(f"kinspect: the kernel dropped {more} packets (now {dropped} in all): the capture "
                          f"misses them; raise --buffer-mb, narrow --filter, or use another --backend")
            if self.out.as_json:
                self.out.record({"type": "notice", "conn": "", "time": time.time(), "kind": "drops",
                                 "what": f"the kernel dropped {more} packets", "dropped": more,
                                 "total": dropped})
                self.out.flush()

    def final(self, mode: str, summary: bool) -> None:
        """After the source ended: its last counters (dumpcap's come only now)."""
        self._read_counters()

    def report(self, summary: bool) -> int:
        """The capture's figures on stderr (and as a JSON notice): packets, drops, gaps."""
        snap = self.stats.snapshot()
        run = self.run
        received = self.received
        dropped = self.dropped
        kernel = "kernel drops unknown" if received is None else \
            f"{received} received by the kernel's filter, {dropped} dropped"
        line = (f"{run.packets} packets captured ({run.tcp_packets} TCP) by {self.source.backend}, {kernel}; "
                f"{snap['tcp_gaps']} TCP gaps; {sum(snap['requests'].values())} exchanges in "
                f"{time.monotonic() - self.started:.1f} s")
        self.out.warn(f"kinspect: {line}")
        if dropped or snap["tcp_gaps"]:
            self.out.warn("kinspect: warning: the capture is incomplete (drops or gaps above): some exchanges "
                          "may be missing or cut")
        if self.out.as_json:
            self.out.record({"type": "notice", "conn": "", "time": time.time(), "kind": "capture",
                             "what": line, "backend": self.source.backend, "packets": run.packets,
                             "tcp_packets": run.tcp_packets, "kernel_received": received,
                             "kernel_dropped": dropped, "tcp_gaps": snap["tcp_gaps"],
                             "written": getattr(self.source, "written", None)})
            self.out.flush()
        return dropped


__all__ = ["sniff"]
