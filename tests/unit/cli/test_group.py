"""The top-level `kinspect` group: its help, with no arguments or --help, on the installed click."""

from __future__ import annotations

import re
import subprocess
import sys

from kinspect.cli import COMMANDS
from kinspect.problems import EXIT_USAGE


def kinspect(*args):
    return subprocess.run([sys.executable, "-m", "kinspect", *args], capture_output=True, text=True,
                          timeout=60)


def test_no_arguments_prints_the_help_on_lines_and_exits_2():
    proc = kinspect()
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert lines[0] == "Usage: kinspect [OPTIONS] COMMAND [ARGS]..."
    assert "\\n" not in proc.stderr and "Error" not in proc.stderr
    for name in COMMANDS:
        assert any(line.split()[:1] == [name] for line in lines), name
    assert proc.stderr == kinspect("--help").stdout  # the same help, on stderr


def test_help_gives_examples_of_real_commands():
    text = kinspect("--help").stdout
    examples = text.split("Examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(examples) >= 3
    for line in examples:
        used = re.findall(r"\bkinspect (\w+)", line)
        assert used and all(name in COMMANDS for name in used), line


GROUP_WITHOUT_ARGUMENTS = """
import sys
import click
from kinspect.cli import cli, main

@cli.group()
def nested():
    '''A group that wants arguments.'''

@nested.command()
def leaf():
    pass

sys.argv = ["kinspect", "nested"]
main()
"""


def test_a_nested_group_without_arguments_prints_its_help_on_lines():
    """Click 8.2 and later raise the help of a group given no arguments as a usage error, whose
    message main() must not escape as it does an argument quoted in an error."""
    proc = subprocess.run([sys.executable, "-c", GROUP_WITHOUT_ARGUMENTS], capture_output=True,
                          text=True, timeout=60)
    shown = proc.stdout + proc.stderr  # click 8.1 prints it on stdout
    assert shown.startswith("Usage: kinspect nested [OPTIONS] COMMAND [ARGS]...\n")
    assert "\\n" not in shown and "  leaf\n" in shown
