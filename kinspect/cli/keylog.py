"""--keylog FILE (repeatable), shared by the commands that read captures: the files become one
tls.KeyLog, read once here (sniff's run re-reads them as they grow)."""

from __future__ import annotations

import click

from kinspect.tls.keylog import KeyLog

HELP = ("Decrypt TLS with an NSS key log (SSLKEYLOGFILE, Python's SSLContext.keylog_filename, a "
        "JVM agent): CLIENT_RANDOM lines for TLS 1.2, *_TRAFFIC_SECRET lines for TLS 1.3 "
        "(repeatable). Keys in a pcapng's Decryption Secrets Block are used without it.")


def _keylog(ctx, param, paths) -> KeyLog | None:
    return KeyLog.from_files(paths) if paths else None


def keylog_option(must_exist: bool = True):
    """The option; ``must_exist=False`` for a live capture, whose client may write it later."""
    return click.option("--keylog", "keylog", multiple=True, metavar="FILE", callback=_keylog,
                        type=click.Path(exists=must_exist, dir_okay=False), help=HELP)


def keylog_warnings(keylog: KeyLog | None) -> list[str]:
    """One-line warnings about the key log: files not read, lines not understood."""
    if keylog is None:
        return []
    out = [f"kinspect: --keylog {why}" for why in keylog.read_errors]
    if keylog.bad_lines:
        out.append(f"kinspect: --keylog: {keylog.bad_lines} lines not understood, skipped "
                   f"(first: {keylog.bad_examples[0]})")
    return out


def no_kafka_message(source: str, run) -> str:
    """What decode says when it found no Kafka: TLS it could not open is named, with the flag."""
    if run.tls_undecrypted:
        return (f"kinspect: {source}: {run.tls_undecrypted} TLS connection(s) could not be decrypted "
                f"and no plaintext Kafka was found; pass --keylog FILE (the client's SSLKEYLOGFILE, "
                f"or Python's SSLContext.keylog_filename)")
    return (f"kinspect: {source}: no Kafka traffic found in {run.packets} packets "
            f"({run.tcp_packets} TCP). If the broker listens on another port, try --port N.")
