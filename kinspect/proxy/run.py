"""Running a proxy: the decoder's process, the event loop, signals, draining.

    code = run(options, decoder, log=print_to_stderr, drain_timeout=10)

``decoder(fd)`` runs in a child process forked before the event loop starts; it reads the tap's
pipe (tap.PipeSource) until the relay closes it and returns the exit code. Without a decoder the
relay only relays. The soft limit of open files is raised to the hard one first, and one line
says how many clients and broker listeners it leaves room for (descriptors.py). Ctrl-C or SIGTERM (or ``duration``) stops accepting and reading new requests,
drains the requests in flight for at most ``drain_timeout`` seconds (relay.Proxy.drain), closes
every connection and the pipe, and waits for the decoder to finish its output; a second signal
stops without waiting for in-flight requests. The decoder's backlog has the same deadline: at
``drain_timeout`` after the stop, what the relay still queues for it is dropped (counted), and the
decoder is told (tap.STOP_SIGNAL) to decode nothing more and finish; one that has not finished
FINISH_GRACE seconds later is killed. A stream of zero-size frames from one client (60 MiB of
zeros) kept the decoder busy for a minute after SIGTERM with --drain-timeout 2.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from typing import Callable

from kinspect.proxy.descriptors import PER_CLIENT, Plan, open_descriptors, raise_limit
from kinspect.proxy.relay import Options, Proxy
from kinspect.proxy.tap import DEFAULT_LIMIT, STOP_SIGNAL, PipeWriter, Tap, stop_now


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


FINISH_GRACE = 5.0  # seconds the decoder has to write its output once told to stop


class Ending:
    """When the decoder's time is up (time.monotonic()): --drain-timeout after the stop, at once
    after a second signal; None until the stop."""

    def __init__(self):
        self.deadline: float | None = None
        self.sooner: asyncio.Event | None = None  # set when the deadline is brought forward

    def begin(self, drain_timeout: float) -> None:
        if self.deadline is None:
            self.deadline = time.monotonic() + drain_timeout

    def now(self) -> None:
        self.deadline = time.monotonic()
        if self.sooner is not None:
            self.sooner.set()

    def left(self) -> float:
        return 0.0 if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)


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
    ending = Ending()
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            hurry = stop = None
            if child is not None:
                hurry, stop = (lambda: _hurry(child.pid)), (lambda: _tell(child, STOP_SIGNAL))
            proxy = runner.run(_serve(options, owner, log, drain_timeout, duration, tap_limit, on_started, hurry,
                                      limits, ending, stop))
    finally:
        if write_fd is not None and owner[0] is not None:
            os.close(write_fd)
        code = 0
        if child is not None:
            code = _finish(child, ending, log)
    return code, proxy


def _tell(child, sig: int) -> None:
    try:
        os.kill(child.pid, sig)
    except (ProcessLookupError, TypeError):
        pass


def _finish(child, ending: Ending, log) -> int:
    """The decoder's exit code, once it has finished: by the deadline on its own, else told to
    stop then, else killed FINISH_GRACE seconds later."""
    child.join(ending.left())
    if child.is_alive():
        _tell(child, STOP_SIGNAL)
        child.join(FINISH_GRACE)
    if child.is_alive():
        child.kill()
        child.join()
        log(f"the decoder did not finish within {FINISH_GRACE:g} s of --drain-timeout's end and was killed; "
            f"its output stops short")
        return 4
    code = child.exitcode if child.exitcode is not None else 4
    if code < 0:  # killed by a signal
        log(f"the decoder process died (signal {-code}); its output stops short")
        code = 4
    return code


DECODER_NICE = 10  # the decoder yields the CPU to the relay (and to the clients and brokers beside it)


def _child(decoder: Callable[[int], int], read_fd: int, write_fd: int) -> None:
    os.close(write_fd)
    try:
        os.nice(DECODER_NICE)  # when CPUs are short it falls behind and skips, never the relay
    except OSError:
        pass
    for sig in (signal.SIGINT, signal.SIGTERM):  # the relay decides when the stream ends
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(STOP_SIGNAL, stop_now)
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
                 tap_limit: int, on_started, hurry=None, limits=(-1, -1), ending: Ending | None = None,
                 stop=None) -> Proxy:
    loop = asyncio.get_running_loop()
    tap = None
    if owner[0] is not None:
        pipe = PipeWriter(owner[0], loop)
        owner[0] = None
        tap = Tap(pipe, loop.call_later, tap_limit)
    try:
        return await _relay(options, tap, log, drain_timeout, duration, on_started, hurry, limits,
                            ending or Ending(), stop)
    except BaseException:
        # the decoder reads until the pipe ends and run() waits for it: whatever stopped the relay
        # (a log line to a closed stderr raises BrokenPipeError), the pipe must end here
        if tap is not None:
            pipe.abort()
        raise


async def _relay(options: Options, tap, log, drain_timeout: float, duration: float | None, on_started,
                 hurry, limits, ending: Ending, stop_decoder) -> Proxy:
    loop = asyncio.get_running_loop()
    ending.sooner = asyncio.Event()
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
        nonlocal signals, drain_timeout
        signals += 1
        stop.set()
        ending.begin(drain_timeout)
        if signals > 1:
            drain_timeout = 0.0
            ending.now()
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
    ending.begin(drain_timeout)
    await proxy.drain(drain_timeout)
    if hurry is not None:
        hurry()
    if tap is not None:
        tap.close()
        await _until(tap.transport.closed, ending)  # the decoder has every byte, or its time is up
        if not tap.transport.closed.done():
            tap.dropped = tap.transport.abort()
            if stop_decoder is not None:
                stop_decoder()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.remove_signal_handler(sig)
    return proxy


async def _until(done: asyncio.Future, ending: Ending) -> None:
    """Until ``done``, the deadline, or a second signal, whichever comes first."""
    sooner = asyncio.ensure_future(ending.sooner.wait())
    try:
        await asyncio.wait([done, sooner], timeout=ending.left(), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sooner.cancel()


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
