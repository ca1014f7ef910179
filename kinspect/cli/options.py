"""Options that several commands share, each declared once (sqlite-utils' ``*_option`` habit):
--show-secrets, the checks' thresholds, the options of a command that reads captures, and the
rotation of a written capture."""

from __future__ import annotations

import functools
import math

import click

from kinspect.cli.exchanges import port_options, stream_bound_options
from kinspect.cli.keylog import keylog_option
from kinspect.doctor.options import DEFAULTS, Thresholds

SHOW_SECRETS = ("Show SASL passwords, proofs and tokens, delegation-token HMACs and secret config values "
                "(redacted by default as \"<redacted N bytes>\"; SASL user names always show).")


def show_secrets_option(command=None, *, scope: str = "", note: str = ""):
    """--show-secrets (``show_secrets``), with one help text; ``scope`` says when it applies
    ("With --data") and ``note`` adds what only this command does with it. Used bare
    (``@show_secrets_option``) or called (``@show_secrets_option(scope=...)``)."""
    help_text = " ".join(part for part in (f"{scope}:" if scope else "", SHOW_SECRETS, note) if part)

    def decorate(command):
        return click.option("--show-secrets", is_flag=True, help=help_text)(command)
    return decorate if command is None else decorate(command)


def capture_options(command):
    """What a command reading captures through the decoder takes: --port and --no-heuristic,
    --max-frame and --max-connections, --show-secrets and --keylog."""
    for option in (keylog_option(), show_secrets_option, stream_bound_options, port_options):
        command = option(command)
    return command


def capture_settings(ports, no_heuristic, max_frame, max_connections, show_secrets, keylog, limits) -> dict:
    """capture_options' values as DecodeRun's settings (9092 always among the ports)."""
    return dict(ports=set(ports) | {9092}, heuristic=not no_heuristic, max_frame=max_frame, limits=limits,
                max_connections=max_connections, show_secrets=show_secrets, keylog=keylog)


def threshold_options(command):
    """The checks' thresholds, each an option with its default; the command gets ``thresholds``."""
    d = DEFAULTS
    options = [
        click.option("--max-rebalances", type=click.IntRange(1), default=d.rebalances, show_default=True,
                     help="rebalance: rebalances of one group that make a warning (fewer: info; a member "
                          "timing out is a warning whatever the count)."),
        click.option("--max-lag-seconds", type=click.FloatRange(0, min_open=True), default=d.lag_seconds,
                     show_default=True, help="lag: seconds behind (record timestamps) that make a warning."),
        click.option("--stalled-after", type=click.FloatRange(0, min_open=True), default=d.stalled_s,
                     show_default=True, help="lag: seconds a group's committed offset stood still while behind "
                                             "the log end that make it stalled (a warning)."),
        click.option("--max-lag", type=click.IntRange(1), default=d.lag, show_default=True,
                     help="lag: records behind that make a stalled group a warning."),
        click.option("--vanished-after", type=click.FloatRange(0), default=d.vanished_s, show_default=True,
                     help="hanging_transaction: seconds a producer with an open transaction was silent "
                          "before the capture ended to count as gone."),
        click.option("--slow-ms", type=click.FloatRange(0, min_open=True), default=d.slow_ms,
                     show_default=True, help="slow: latency beyond the wait a request asked for."),
        click.option("--min-throttle-ms", type=click.IntRange(1), default=d.throttle_ms, show_default=True,
                     help="throttle: total throttle of a client and API that makes a warning."),
        click.option("--max-state", type=click.IntRange(1), default=d.max_state, show_default=True,
                     help="Groups, producers, connections or clients each check keeps; past it the least "
                          "recently seen are dropped, with a notice."),
    ]

    @functools.wraps(command)
    def wrapped(*args, max_rebalances, max_lag, max_lag_seconds, stalled_after, vanished_after, slow_ms, min_throttle_ms,
                max_state, **kwargs):
        thresholds = Thresholds(rebalances=max_rebalances, lag=max_lag, lag_seconds=max_lag_seconds,
                                stalled_s=stalled_after,
                                vanished_s=vanished_after, slow_ms=slow_ms, throttle_ms=min_throttle_ms,
                                max_state=max_state)
        return command(*args, thresholds=thresholds, **kwargs)

    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped


MIB = 1 << 20


def rotation_options(command):
    """--rotate-mb, --rotate-seconds and --keep: how a written capture rotates (capture/write.py's
    RotatingRecording). The command gets ``rotation``: None, or RotatingRecording's max_bytes,
    max_seconds and keep. A value that is not a positive number, or --keep without a rotation,
    is a usage error."""
    positive = click.FloatRange(0, min_open=True)
    options = [
        click.option("--rotate-mb", type=positive, metavar="N",
                     help="With --write: a new file once the current one holds N MiB (fractions too); the files "
                          "are PATH's NAME_00001.pcapng, NAME_00002.pcapng, ... beside it."),
        click.option("--rotate-seconds", type=positive, metavar="S",
                     help="With --write: a new file every S seconds, with or without traffic."),
        click.option("--keep", "keep_files", type=click.IntRange(1), metavar="K",
                     help="With --rotate-mb or --rotate-seconds: keep only the newest K files (the one being "
                          "written included); older files this run wrote are deleted."),
    ]

    @functools.wraps(command)
    def wrapped(*args, rotate_mb, rotate_seconds, keep_files, **kwargs):
        for option, value in (("--rotate-mb", rotate_mb), ("--rotate-seconds", rotate_seconds)):
            if value is not None and not math.isfinite(value):
                raise click.BadParameter(f"{value} is not a finite number; give a positive one",
                                         param_hint=f"'{option}'")
        rotation = None
        if rotate_mb is not None or rotate_seconds is not None:
            rotation = dict(max_bytes=None if rotate_mb is None else max(1, round(rotate_mb * MIB)),
                            max_seconds=rotate_seconds, keep=keep_files)
        elif keep_files is not None:
            raise click.UsageError("--keep needs --rotate-mb or --rotate-seconds: it counts the rotated files")
        return command(*args, rotation=rotation, **kwargs)

    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped
