"""--keylog FILE (repeatable), shared by the commands that read captures: the files become one
tls.KeyLog, read once here (sniff's run re-reads them as they grow). A key log that is not a
regular file (a FIFO, a device) is refused at once: reading it would block or never end."""

from __future__ import annotations

import os
import stat
import sys

import click

from kinspect.problems import EXIT_UNREADABLE
from kinspect.render.safe import escape, path_text
from kinspect.tls.keylog import NOT_REGULAR, KeyLog

HELP = ("Decrypt TLS with an NSS key log (SSLKEYLOGFILE, Python's SSLContext.keylog_filename, a "
        "JVM agent): CLIENT_RANDOM lines for TLS 1.2, *_TRAFFIC_SECRET lines for TLS 1.3 "
        "(repeatable). Keys in a pcapng's Decryption Secrets Block are used without it.")


def _keylog(ctx, param, paths) -> KeyLog | None:
    if not paths:
        return None
    for path in paths:
        _refuse_special(path)
    keylog = KeyLog.from_files(paths)
    for path in keylog.not_regular:  # it became one since: the same answer
        _refuse_special(path)
    return keylog


def _refuse_special(path) -> None:
    """Exit 3 with one line when ``path`` exists and is not a regular file (stat never blocks)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing or unreadable: said by the option's check, or by the key log's read_errors
    if not stat.S_ISREG(mode):
        print(escape(f"kinspect: --keylog {path_text(path)}: {NOT_REGULAR}"), file=sys.stderr)
        sys.exit(EXIT_UNREADABLE)


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
                   f"(first: {keylog.first_bad})")
    if keylog.dropped:
        out.append(f"kinspect: --keylog: {keylog.dropped} secrets past the first {keylog.lines} not used "
                   f"(at most that many are kept); give only the key-log lines of the capture's connections")
    return out


def keylog_news(keylog: KeyLog, before: tuple[int, int, int], where: str) -> list[str]:
    """Warnings about what a run added to ``keylog`` (a pcapng's Decryption Secrets Blocks, a key
    log that grew or changed while sniff ran) since ``before`` (``keylog_counts`` then)."""
    bad, errors, dropped = (now - then for now, then in zip(keylog_counts(keylog), before))
    out = [f"kinspect: --keylog {why}" for why in keylog.read_errors[len(keylog.read_errors) - errors:]] \
        if errors else []
    if bad:
        out.append(f"kinspect: {where}: {bad} key-log lines not understood, skipped (first: {keylog.first_bad})")
    if dropped:
        out.append(f"kinspect: {where}: {dropped} secrets not used (at most {keylog.lines} are kept)")
    return out


def keylog_counts(keylog: KeyLog | None) -> tuple[int, int, int]:
    return (keylog.bad_lines, len(keylog.read_errors), keylog.dropped) if keylog is not None else (0, 0, 0)


def no_kafka_message(source: str, run) -> str:
    """What decode says when it found no Kafka: TLS it could not open is named, with the flag."""
    if run.tls_undecrypted:
        return (f"kinspect: {source}: {run.tls_undecrypted} TLS connection(s) could not be decrypted "
                f"and no plaintext Kafka was found; pass --keylog FILE (the client's SSLKEYLOGFILE, "
                f"or Python's SSLContext.keylog_filename)")
    return (f"kinspect: {source}: no Kafka traffic found in {run.packets} packets "
            f"({run.tcp_packets} TCP). If the broker listens on another port, try --port N.")
