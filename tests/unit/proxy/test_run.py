"""The decoder process's scheduling (proxy/run.py): SCHED_IDLE while the relay runs, SCHED_OTHER
(at its nice value) once the relay has stopped and only the decoder's backlog is left; and the
decoder's pipe ends however the relay stops; and which event loop runs the relay."""

import os
import subprocess
import time

from kinspect.proxy.run import _hurry, _idle


def test_the_decoder_runs_idle_then_is_hurried_at_its_nice_value():
    child = subprocess.Popen(["sleep", "30"], preexec_fn=lambda: os.nice(10))
    try:
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        _idle(child.pid)
        assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        _hurry(child.pid)
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == min(os.getpriority(os.PRIO_PROCESS, 0) + 10, 19)
    finally:
        child.kill()
        child.wait()


def test_a_relay_stopped_by_an_error_ends_the_decoders_pipe_and_exits():
    """Whoever read the proxy's output is gone (stdout and stderr closed), then SIGTERM: the
    "stopping" line raises BrokenPipeError inside the relay. Before, the pipe to the decoder stayed
    open, so the decoder waited for its end and the relay waited for the decoder, for ever."""
    import signal
    import socket
    import sys
    from pathlib import Path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proxy = subprocess.Popen([sys.executable, "-m", "kinspect", "proxy", "--listen", f"127.0.0.1:{port}",
                              "--upstream", "127.0.0.1:1", "--json"], cwd=Path(__file__).resolve().parents[3],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert b"open files: limit" in proxy.stderr.readline()
        assert b"listening on" in proxy.stderr.readline()
        children = Path(f"/proc/{proxy.pid}/task/{proxy.pid}/children").read_text().split()
        assert len(children) == 1  # the decoder
        proxy.stdout.close()
        proxy.stderr.close()
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(30)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{children[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not Path(f"/proc/{children[0]}").exists()  # the decoder saw the end and exited too
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait()


def test_kinspect_event_loop_asyncio_picks_asyncios_loop_even_with_uvloop_installed(monkeypatch):
    import asyncio

    from kinspect.proxy.run import event_loop_factory
    monkeypatch.setenv("KINSPECT_EVENT_LOOP", "asyncio")
    factory, name = event_loop_factory()
    assert (factory, name) == (asyncio.new_event_loop, "asyncio")
    monkeypatch.delenv("KINSPECT_EVENT_LOOP")
    try:
        import uvloop
    except ImportError:
        assert event_loop_factory()[1] == "asyncio"
    else:
        assert event_loop_factory() == (uvloop.new_event_loop, "uvloop")
