"""kinspect proxy: a Kafka relay that decodes what it passes.

Thin: the relay, the listeners and the rewriting are kinspect.proxy's; the decoding runs in a
child process through the stream-source seam (proxy/tap.py's PipeSource into pipeline.DecodeRun)
and live/loop.py's loop, as sniff's does, and its lines, JSON, filters and summary are decode's
and sniff's (cli/exchanges.py).
"""

from __future__ import annotations

import ssl
import sys
import time

import click

from kinspect.cli.exchanges import emit, filter_options, print_summary
from kinspect.cli.limits import limit_options
from kinspect.cli.options import show_secrets_option
from kinspect.cli.schemas import open_schemas, schema_options, schema_stage, write_notices
from kinspect.cli.output import Output, output_options
from kinspect.decode.filters import ExchangeFilter
from kinspect.limits import Limits
from kinspect.decode.finish import JSON, RECORD, SUMMARY
from kinspect.decode.pipeline import DecodeRun
from kinspect.problems import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kinspect.decode.summary import Summary
from kinspect.wire.frames import MAX_FRAME

PENDING_TIMEOUT = 60.0

EPILOG = """\b
Examples:
  kinspect proxy --listen 127.0.0.1:19092 --upstream broker1:9092
      clients bootstrap to 127.0.0.1:19092; broker N is reached through 127.0.0.1:19093+N
  kinspect proxy --listen 0.0.0.0:19092 --advertised-host proxy.internal --upstream kafka:9092 --json
  kinspect proxy --listen :19092 --upstream kafka:9093 --upstream-tls --upstream-ca ca.pem \\
      --listen-tls proxy.pem proxy.key --errors --summary
  kinspect proxy --listen :19092 --upstream kafka:9092 --no-rewrite --no-decode   # a plain relay

\b
Every byte passes unchanged, except the broker addresses in Metadata, FindCoordinator,
DescribeCluster and (KIP-951) Produce v10+/Fetch v16+ responses, which are rewritten to the
proxy's listeners: the bootstrap on --listen's port BASE, broker N on BASE+1+N (or as
--broker-map says), opened as brokers are learned, at most --max-brokers of them, and closed when
a Metadata response no longer names the broker (connections through it go on). --no-rewrite
relays everything unchanged.
To be rewritten, those responses are held until whole (a Fetch v16+ response's node endpoints
come after its records, and its length before them), so a consumer's records wait for their
whole response; at most --max-held-mb are held at once, and a response that does not fit passes
unchanged (warned, counted: a KIP-951 address in it would reach the client as the broker gave it).
Decoding runs in a second process; if it falls behind by --decode-buffer-mb it skips (gap
notices say how many bytes), and the relay never waits for it.

\b
Exit codes: 0 fine (Ctrl-C and SIGTERM stop it normally: no new connections, no new requests
read from clients (each is read to the end of the request under way), the responses to those
forwarded relayed for at most --drain-timeout, then the summary: what the decoder has not decoded
by then is counted and left); 1 with --strict, an exchange had a problem;
2 usage error (a port in use, an unreadable certificate); 4 internal error.
"""


def _address(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise click.BadParameter(f"{value!r}: expected HOST:PORT", param_hint=what)
    return host.strip("[]"), int(port)


def _broker_map(values) -> dict[int, int]:
    out = {}
    for value in values:
        node, sep, port = value.partition("=")
        if not sep or not node.lstrip("-").isdigit() or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{value!r}: expected NODE_ID=PORT", param_hint="--broker-map")
        out[int(node)] = int(port)
    return out


def _contexts(listen_tls, upstream_tls, upstream_ca, upstream_cert):
    server = client = None
    try:
        if listen_tls:
            server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server.load_cert_chain(*listen_tls)
        if upstream_tls or upstream_ca or upstream_cert:
            client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=upstream_ca)
            if upstream_cert:
                client.load_cert_chain(*upstream_cert)
    except (OSError, ssl.SSLError) as e:
        raise click.UsageError(f"TLS: {getattr(e, 'strerror', None) or e}; check the certificate and key paths")
    return server, client


@click.command(epilog=EPILOG)
@click.option("--listen", required=True, metavar="HOST:PORT",
              help="Where clients connect (the bootstrap); brokers get PORT+1+node id.")
@click.option("--upstream", required=True, metavar="HOST:PORT", help="A broker to bootstrap from.")
@click.option("--advertised-host", help="The host put in rewritten addresses (default: --listen's host; "
              "needed when it is a wildcard).")
@click.option("--broker-map", "broker_map", multiple=True, metavar="NODE_ID=PORT",
              help="Listen for this broker on this port instead of PORT+1+NODE_ID (repeatable).")
@click.option("--no-rewrite", is_flag=True, help="Relay every response unchanged (one listener only).")
@click.option("--listen-tls", nargs=2, type=click.Path(exists=True, dir_okay=False), metavar="CERT KEY",
              help="Clients speak TLS to the proxy, with this certificate chain and key (PEM).")
@click.option("--upstream-tls", is_flag=True, help="The proxy speaks TLS to the brokers.")
@click.option("--upstream-ca", type=click.Path(exists=True, dir_okay=False),
              help="CA certificates (PEM) the brokers' certificates are checked against (implies --upstream-tls).")
@click.option("--upstream-cert", nargs=2, type=click.Path(exists=True, dir_okay=False), metavar="CERT KEY",
              help="Client certificate and key for mTLS to the brokers (implies --upstream-tls).")
@click.option("--max-held-mb", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Responses that may name brokers (Metadata, FindCoordinator, DescribeCluster, Produce v10+, "
                   "Fetch v16+) are held whole to be rewritten: at most this many MiB at once over all "
                   "connections; one that does not fit passes unchanged (warned, counted).")
@click.option("--max-brokers", type=click.IntRange(1, 65535), default=1000, show_default=True,
              help="Brokers given a listener at once; past it a broker's address goes to clients unchanged "
                   "(warned once, counted). Far above a real cluster's broker count, far below what a "
                   "hostile Metadata response can name. Lowered at start if the open-file limit is short.")
@click.option("--no-decode", is_flag=True, help="Only relay: no decoder process, no output but the log.")
@filter_options
@click.option("--summary", is_flag=True, help="At the end: per-API counts, latency p50/p99/max, bytes, errors.")
@click.option("-v", "--verbose", is_flag=True, help="Show each exchange's decoded request and response.")
@click.option("--strict", is_flag=True, help="Exit 1 when any exchange has a problem.")
@click.option("--live", "dashboard", is_flag=True, help="A dashboard instead of the lines on the terminal.")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Serve the live figures for Prometheus "
              "on this port (http://HOST:PORT/metrics).")
@click.option("--metrics-address", default="", help="Address the metrics endpoint binds (default: all).")
@click.option("--duration", type=click.FloatRange(0, min_open=True), help="Stop after this many seconds.")
@click.option("--drain-timeout", type=click.FloatRange(0), default=10.0, show_default=True,
              help="Seconds to wait for in-flight requests when stopping, and for the decoder's backlog.")
@click.option("--decode-buffer-mb", type=click.IntRange(1, 4096), default=64, show_default=True,
              help="Bytes waiting for the decoder, MiB, past which it skips decoding (never relaying).")
@click.option("--pending-timeout", type=click.FloatRange(0, min_open=True), default=PENDING_TIMEOUT,
              show_default=True, help="Seconds a request waits for its response before it is shown "
                                      "with \"no response\".")
@click.option("--max-frame", type=click.IntRange(1024), default=MAX_FRAME, show_default=True,
              help="Largest Kafka frame decoded, in bytes (larger ones are relayed, not decoded).")
@schema_options
@show_secrets_option
@click.option("--quiet", "-q", is_flag=True, help="No connect and close lines on stderr.")
@limit_options
@output_options
def proxy(listen, upstream, advertised_host, broker_map, no_rewrite, listen_tls, upstream_tls, upstream_ca,
          upstream_cert, max_held_mb, max_brokers, no_decode, keep: ExchangeFilter, summary, verbose, strict, dashboard, metrics_port,
          metrics_address, duration, drain_timeout, decode_buffer_mb, pending_timeout, max_frame, schema_sources,
          schemas_topic, raw_values, show_secrets, quiet, out: Output, limits: Limits):
    """Relay Kafka clients to their brokers, decoding every exchange on the way (no root needed).

    Clients bootstrap to --listen; every broker address they learn points back at the proxy.
    The output is decode's and sniff's: a line per exchange, -v, --json, filters, --summary.
    """
    from kinspect.proxy.relay import Options
    from kinspect.proxy.run import Stopped, run

    listen_host, base_port = _address(listen, "--listen")
    upstream_addr = _address(upstream, "--upstream")
    server_ssl, client_ssl = _contexts(listen_tls, upstream_tls, upstream_ca, upstream_cert)
    if advertised_host is None:
        if listen_host in ("", "0.0.0.0", "::"):
            import socket
            advertised_host = socket.getfqdn()
        else:
            advertised_host = listen_host
    options = Options(upstream=upstream_addr, listen_host=listen_host, base_port=base_port,
                      advertised_host=advertised_host, rewrite=not no_rewrite, broker_ports=_broker_map(broker_map),
                      server_ssl=server_ssl, upstream_ssl=client_ssl, max_held=max_held_mb << 20,
                      max_brokers=max_brokers)

    def log(message: str) -> None:
        if not quiet or message.startswith(("warning", "stopping", "drained", "listening", "open files")):
            out.warn(f"kinspect: {message}")

    decoder = None
    if not no_decode:
        decoder = _Decoder(out, keep, summary, verbose, strict, dashboard, metrics_port, metrics_address,
                           pending_timeout, max_frame, show_secrets, limits, listen,
                           schemas=None if raw_values or summary else (schema_sources, schemas_topic))
        if metrics_port is not None:
            try:
                import prometheus_client  # noqa: F401 (checked before the relay starts)
            except ImportError:
                out.warn("kinspect: --metrics-port needs prometheus_client: pip install prometheus_client")
                sys.exit(EXIT_USAGE)

    def started(relay) -> None:
        tls = " (TLS)" if server_ssl is not None else ""
        log(f"listening on {listen_host or '*'}:{relay.bootstrap_port}{tls}, relaying to "
            f"{upstream_addr[0]}:{upstream_addr[1]}{' with TLS' if client_ssl is not None else ''}; "
            f"brokers on {advertised_host}:{base_port}+1+node id" + ("" if not no_rewrite else " (no rewriting)"))

    try:
        code, relay = run(options, decoder, log, drain_timeout=drain_timeout, duration=duration,
                          tap_limit=decode_buffer_mb << 20, on_started=started)
    except Stopped as e:
        out.warn(f"kinspect: {e}")
        sys.exit(EXIT_USAGE)
    c = relay.counters
    skipped = relay.tap.skipped_bytes if relay.tap is not None else 0
    dropped = relay.tap.dropped if relay.tap is not None else 0
    out.warn(f"kinspect: {c.connections} connections relayed, {c.client_bytes} bytes from clients, "
             f"{c.server_bytes} bytes to clients; {c.rewritten} responses rewritten, {c.unchanged} that named "
             f"brokers relayed unchanged (not re-encodable), {relay.held.refused} not held (past --max-held-mb); "
             f"decoding skipped {skipped} bytes" + (f", and {dropped} more waiting for the decoder when "
                                                    f"--drain-timeout ended" if dropped else ""))
    sys.exit(code)


class _Decoder:
    """The decoder process's work: the pipe → DecodeRun → the lines (or JSON, or the summary)."""

    def __init__(self, out: Output, keep, summary, verbose, strict, dashboard, metrics_port, metrics_address,
                 pending_timeout, max_frame, show_secrets, limits, title, schemas=None):
        self.out, self.keep, self.summary, self.verbose, self.strict = out, keep, summary, verbose, strict
        self.dashboard, self.metrics_port, self.metrics_address = dashboard, metrics_port, metrics_address
        self.pending_timeout, self.max_frame, self.show_secrets = pending_timeout, max_frame, show_secrets
        self.limits, self.title = limits, title
        self.schemas = schemas  # (--schemas sources, --schemas-topic), or None: values as bytes

    def __call__(self, fd: int) -> int:
        from kinspect.live.loop import LiveLoop
        from kinspect.proxy.tap import PipeSource

        out = self.out
        source = PipeSource(fd)
        loop = LiveLoop()
        stats = loop.stats
        run = None

        def tick(now: float) -> None:
            stats.set_capture(in_flight=run.session.in_flight())
            loop.refresh()

        run = DecodeRun(source, max_frame=self.max_frame, limits=self.limits, show_secrets=self.show_secrets,
                        pending_timeout=self.pending_timeout, on_tick=tick)
        if self.metrics_port is not None:
            try:
                loop.serve_metrics(self.metrics_port, self.metrics_address)
            except OSError as e:
                out.warn(f"kinspect: --metrics-port {self.metrics_port}: {e.strerror or e}; no metrics served")
        mode = SUMMARY if self.summary else JSON if out.as_json else RECORD
        if self.dashboard:
            console = out.console if out.interactive else out.err
            loop.dashboard(console, title=f"proxy {self.title}")
        lines = not (loop.board is not None and out.interactive)
        write = None if out.interactive else out.stream.write
        totals = Summary()
        schemas = stage = None
        if self.schemas is not None:
            sources, topic = self.schemas
            schemas, _ = open_schemas(sources, topic, self.limits, out)  # a source that fails was told
            stage = schema_stage(schemas, topic, None, self.show_secrets, None, out, {})
        started = time.monotonic()
        with loop:
            any_problems = loop.run(run, lambda output: emit(out, output, mode, totals, lines, self.verbose, write),
                                    keep=self.keep, mode=mode, before=_skipped, stages=(stage,) if stage else ())
        if schemas is not None:
            write_notices(schemas, None, out)
        if self.summary:
            print_summary(out, totals)
        snap = stats.snapshot()
        line = (f"decoded {sum(snap['requests'].values())} exchanges of {run.kafka_connections} connections in "
                f"{time.monotonic() - started:.1f} s; {source.skipped} bytes not decoded (the decoder fell behind)")
        if source.left:
            line += f", {source.left} more not decoded when --drain-timeout ended"
        out.warn(f"kinspect: {line}")
        if out.as_json:
            out.record({"type": "notice", "conn": "", "time": time.time(), "kind": "proxy", "what": line,
                        "connections": run.kafka_connections, "skipped_bytes": source.skipped,
                        "left_bytes": source.left})
        out.flush()
        return EXIT_PROBLEMS if self.strict and any_problems else EXIT_OK


def _skipped(notice: dict) -> None:
    """A gap in a proxied stream is bytes the decoder skipped (it fell behind), never bytes lost:
    its notice says so (other records pass as they are)."""
    if notice.get("kind") != "gap" or notice["type"] != "notice":
        return
    side = "client" if "client side" in notice["what"] else "broker"
    notice["kind"] = "skipped"
    notice["what"] = (f"{notice.get('missing')} bytes from the {side} not decoded: the decoder fell behind "
                      f"(they were relayed intact); decoding resumes at the next frame")


__all__ = ["proxy"]
