"""The proxy's open-file limit (proxy/descriptors.py): the soft limit raised to the hard one, in a
real child process started at a low limit; and what a limit leaves room for."""

import subprocess
import sys

from kinspect.proxy.descriptors import BROKER_SHARE, PER_CLIENT, SPARE, Plan


def test_the_soft_limit_is_raised_to_the_hard_one():
    code = ("import resource; from kinspect.proxy.descriptors import raise_limit; "
            "print(raise_limit(), resource.getrlimit(resource.RLIMIT_NOFILE))")
    out = subprocess.run(["prlimit", "--nofile=64:512", "--", sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["(64,", "512)", "(512,", "512)"]


def test_a_limit_already_at_its_hard_value_stays():
    code = "from kinspect.proxy.descriptors import raise_limit; print(raise_limit())"
    out = subprocess.run(["prlimit", "--nofile=300:300", "--", sys.executable, "-c", code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "(300, 300)"


def test_the_plan_leaves_clients_most_of_the_room():
    plan = Plan.of(20_000, 12, 1000)
    assert plan.brokers == 1000 and plan.clients == (20_000 - 12 - SPARE - 1000) // PER_CLIENT
    low = Plan.of(1024, 12, 1000)  # at the common limit, listeners may take a quarter at most
    assert low.brokers == (1024 - 12 - SPARE) // BROKER_SHARE < 1000
    assert low.clients == (1024 - 12 - SPARE - low.brokers) // PER_CLIENT
    assert Plan.of(20, 12, 1000) == Plan(20, 0, 0)  # nothing left: nothing promised
    assert Plan.of(-1, 12, 1000) == Plan(-1, 1000, -1)  # no limit known: --max-brokers as given
