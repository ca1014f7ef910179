"""The decoder process's scheduling (proxy/run.py): SCHED_IDLE while the relay runs, SCHED_OTHER
(at its nice value) once the relay has stopped and only the decoder's backlog is left."""

import os
import subprocess

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
