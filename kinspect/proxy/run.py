"""Running a proxy: the decoder's process, the event loop, signals, draining.

    code = run(options, decoder, log=print_to_stderr, drain_timeout=10)

``decoder(fd)`` runs in a child process forked before the event loop starts; it reads the tap's
pipe (tap.PipeSource) until the relay closes it and returns the exit code. Without a decoder the
relay only relays. The soft limit of open files is raised to the hard one first, and one line
says how many clients and broker listeners it leaves room for (descriptors.py). Ctrl-C or SIGTERM (or ``duration``) stops accepting and reading new requests,
drains the requests in flight for at most ``drain_timeout`` seconds (relay.Proxy.drain), closes
every connection and the pipe, and waits for the decoder to finish its output; a second signal
stops without waiting for in-flight requests.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
from typing import Callable

from kinspect.proxy.descriptors import PER_CLIENT, Plan, open_descriptors, raise_limit
from kinspect.proxy.relay import Options, Proxy
from kinspect.proxy.tap import DEFAULT_LIMIT, PipeWriter, Tap


def event_loop_factory():
    """uvloop's loop when it is installed, else asyncio's; KINSPECT_EVENT_LOOP=asyncio picks
    asyncio's in any case."""
    if os.environ.get("KINSPECT_EVENT_LOOP") == "asyncio":
        return asyncio.new_event_loop, "asyncio"
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop, "asyncio"
    return uvloop.new_event_loop, "uvloop"


class Stopped(Exception):
    """The proxy could not start (a port in use, say): the message says what to do."""


def run(options: Options, decoder: Callable[[int], int] | None, log: Callable[[str], None], *,
        drain_timeout: float = 10.0, duration: float | None = None, tap_limit: int = DEFAULT_LIMIT,
        on_started: Callable[[Proxy], None] | None = None) -> tuple[int, Proxy]:
    """Returns (the decoder's exit code, or 0 without one; the proxy, for its counters)."""
    limits = raise_limit()
    child = None
    write_fd = None
    if decoder is not None:
        read_fd, write_fd = os.pipe()
        child = multiprocessing.get_context("fork").Process(target=_child, args=(decoder, read_fd, write_fd),
                                                            name="kinspect-proxy-decoder", daemon=True)
        child.start()
        _idle(child.pid)  # here, not in the child: before _hurry whatever the child's pace
        os.close(read_fd)
    factory, _name = event_loop_factory()
    proxy = None
    owner = [write_fd]
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            hurry = (lambda: _hurry(child.pid)) if child is not None else None
            proxy = runner.run(_serve(options, owner, log, drain_timeout, duration, tap_limit, on_started, hurry,
                                      limits))
    finally:
        if write_fd is not None and owner[0] is not None:
            os.close(write_fd)
        code = 0
        if child is not None:
            child.join()
            code = child.exitcode if child.exitcode is not None else 4
            if code < 0:  # killed by a signal
                log(f"the decoder process died (signal {-code}); its output stops short")
                code = 4
    return code, proxy


DECODER_NICE = 10  # the decoder yields the CPU to the relay (and to the clients and brokers beside it)


def _child(decoder: Callable[[int], int], read_fd: int, write_fd: int) -> None:
    os.close(write_fd)
    try:
        os.nice(DECODER_NICE)  # when CPUs are short it falls behind and skips, never the relay
    except OSError:
        pass
    for sig in (signal.SIGINT, signal.SIGTERM):  # the relay decides when the stream ends
        signal.signal(sig, signal.SIG_IGN)
    raise SystemExit(decoder(read_fd))


def _idle(pid: int) -> None:
    """Linux: the decoder runs only on CPU time nobody else wants. At nice 10 it still took about
    a tenth of a CPU from each busy neighbour (measured: a producer beside it ran at 0.69x direct
    with 1 KiB values; 0.95x with the decoder SCHED_IDLE, which skipped about as much: 85% vs 87%
    of the bytes at full producer speed on a saturated machine)."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def _hurry(pid: int) -> None:
    """The relay is done: the decoder's backlog and output are all that is left, so it runs at
    nice 10 again rather than only on idle CPU time (which a busy machine may not have)."""
    try:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not allowed (RLIMIT_NICE): it finishes when it can
        pass


async def _serve(options: Options, owner: list, log, drain_timeout: float, duration: float | None,
                 tap_limit: int, on_started, hurry=None, limits=(-1, -1)) -> Proxy:
    loop = asyncio.get_running_loop()
    tap = None
    if owner[0] is not None:
        pipe = PipeWriter(owner[0], loop)
        owner[0] = None
        tap = Tap(pipe, loop.call_later, tap_limit)
    try:
        return await _relay(options, tap, log, drain_timeout, duration, on_started, hurry, limits)
    except BaseException:
        # the decoder reads until the pipe ends and run() waits for it: whatever stopped the relay
        # (a log line to a closed stderr raises BrokenPipeError), the pipe must end here
        if tap is not None:
            pipe.abort()
        raise


async def _relay(options: Options, tap, log, drain_timeout: float, duration: float | None, on_started,
                 hurry, limits=(-1, -1)) -> Proxy:
    loop = asyncio.get_running_loop()
    proxy = Proxy(options, tap, log)
    try:
        await proxy.start()
    except OSError as e:
        if tap is not None:
            tap.close()
            await tap.transport.closed
        raise Stopped(f"cannot listen on {options.listen_host}:{options.base_port}: {e.strerror or e}; "
                      f"choose another --listen") from None
    stop = asyncio.Event()
    signals = 0

    def on_signal():
        nonlocal signals
        signals += 1
        stop.set()
        if signals > 1:
            nonlocal drain_timeout
            drain_timeout = 0.0
            for link in list(proxy.links.values()):
                link.close()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    _plan(options, limits, log)
    if on_started is not None:
        on_started(proxy)
    try:
        await asyncio.wait_for(stop.wait(), duration) if duration is not None else await stop.wait()
    except asyncio.TimeoutError:
        pass
    await proxy.drain(drain_timeout)
    if hurry is not None:
        hurry()
    if tap is not None:
        tap.close()
        await tap.transport.closed  # the decoder has every byte (its backlog is bounded by tap_limit)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
    return proxy


def _plan(options: Options, limits: tuple[int, int], log) -> Plan:
    """The broker listeners and clients the open-file limit leaves room for, said in one line
    (a warning when it allows fewer listeners than --max-brokers, which is then lowered)."""
    before, limit = limits
    wanted = options.max_brokers
    plan = Plan.of(limit, open_descriptors(), wanted)
    if plan.clients < 0:
        return plan
    options.max_brokers = plan.brokers
    raised = f" (raised from {before:,})" if before != limit else ""
    log(f"open files: limit {limit:,}{raised}, room for about {plan.clients:,} concurrent clients "
        f"({PER_CLIENT} descriptors each) beside {plan.brokers:,} broker listeners")
    if plan.brokers < wanted:
        log(f"warning: the open-file limit ({limit:,}) leaves room for {plan.brokers:,} broker listeners, not "
            f"--max-brokers {wanted:,}; raise the hard limit (ulimit -Hn) for more")
    return plan
