"""The kinspect command line: thin over the library, one module per subcommand."""

from __future__ import annotations

import gc
import importlib
import os
import sys

import click

from kinspect import __version__
from kinspect.cli import codecache
from kinspect.problems import EXIT_INTERRUPTED, EXIT_OK, EXIT_UNFINISHED, EXIT_UNREADABLE, EXIT_USAGE
from kinspect.render.safe import escape

EPILOG = """\b
Examples:
  kinspect decode pcaps/librdkafka-produce-consume.pcapng
  tcpdump -i any -w - port 9092 | kinspect decode --json -
  kinspect validate --strict /var/lib/kafka/orders-0/
  kinspect dump --records --data /var/lib/kafka/__consumer_offsets-12/
  kinspect offsets my-group --log-dir /var/lib/kafka
  kinspect decode --help                      every command's options and examples

\b
Exit codes: 0 fine; 1 problems found (validate, or --strict); 2 usage error;
3 input unreadable (not a capture, missing file, unsupported link type);
4 kinspect could not finish (a worker process died, or an internal error); 130 interrupted.
"""


class _ReaderGone(Exception):
    """Stdout's reader went away (| head)."""


# Commands that end by leaving at once, without Python's tear-down (see _leave): they run no
# thread or child process past their own end, and everything they write is flushed first.
QUICK_EXIT = frozenset({"decode", "dump", "validate"})

# Each subcommand's module, imported only when that command runs (or when --help lists them):
# importing them all took a tenth of a second of every run.
COMMANDS = {
    "clients": "kinspect.cli.clients",
    "decode": "kinspect.cli.decode",
    "doctor": "kinspect.cli.doctor",
    "dump": "kinspect.cli.dump",
    "offsets": "kinspect.cli.offsets",
    "proxy": "kinspect.cli.proxy",
    "report": "kinspect.cli.report",
    "sniff": "kinspect.cli.sniff",
    "spark": "kinspect.cli.spark",
    "validate": "kinspect.cli.validate",
}


class _Commands(click.Group):
    resolved: str | None = None  # the subcommand this run resolved to

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        if name not in self.commands and name in COMMANDS:
            module = importlib.import_module(COMMANDS[name])
            self.add_command(getattr(module, name), name)
        return self.commands.get(name)

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        self.resolved = name
        return name, command, rest

    def parse_args(self, ctx, args):
        if not args and not ctx.resilient_parsing:
            # Click 8.1 prints the help on stdout and exits 0; 8.2 and later raise it as a usage
            # error (NoArgsIsHelpError). One behaviour on every version: the help, exit 2.
            click.echo(ctx.get_help(), err=True, color=ctx.color)
            ctx.exit(EXIT_USAGE)
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # before click, which would turn it into exit 1 (problems found)
            raise _ReaderGone from None


@click.group(cls=_Commands, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kinspect")
def cli():
    """Inspect and debug Apache Kafka's wire protocol and storage."""


# Young collections every 10,000 allocations, not 700, so that full passes of the cyclic GC do not
# revisit a capture's steady state (why: tests/bench/README.md, "Tuning history"). kinspect's runs
# leave no reference cycles (tests/unit/wire/test_session.py), so no memory waits for the collector.
GC_THRESHOLD = 10_000

# Click 8.2 and later raise a group's help as this usage error when it is given no arguments.
_HELP_AS_ERROR = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main() -> None:
    """Run the command line; whatever happens, the exit code is a documented one and the user
    sees no traceback (KINSPECT_DEBUG=1 shows it, for a bug report)."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    codecache.install()
    try:
        code = cli.main(prog_name="kinspect", standalone_mode=False)
    except SystemExit as e:  # the commands' own exit codes
        if not (e.code is None or isinstance(e.code, int)):
            raise
        code = e.code
    except click.ClickException as e:  # every one kinspect raises is about how it was called
        if not isinstance(e, _HELP_AS_ERROR):  # that one's message is the help, kinspect's own text
            e.message = escape(e.message)  # it may quote an argument
        e.show()
        code = EXIT_USAGE
    except (click.Abort, KeyboardInterrupt):
        code = EXIT_INTERRUPTED
    except (_ReaderGone, BrokenPipeError):  # nothing more to say to a reader that left
        _quiet_stdout()
        code = EXIT_OK
    except ModuleNotFoundError as e:
        if os.environ.get("KINSPECT_DEBUG") or not e.name or e.name.split(".")[0] == "kinspect":
            raise
        print(f"kinspect: {missing_package(e.name)}", file=sys.stderr)
        code = EXIT_UNREADABLE
    except Exception as e:
        if os.environ.get("KINSPECT_DEBUG"):
            raise
        message = escape(f"{type(e).__name__}: {e}")
        print(f"kinspect: internal error: {message} (please report; KINSPECT_DEBUG=1 shows the "
              f"traceback)", file=sys.stderr)
        code = EXIT_UNFINISHED
    code = code if isinstance(code, int) else EXIT_OK
    profiled = sys.getprofile() is not None or sys.gettrace() is not None  # cProfile, coverage: they write at exit
    if cli.resolved in QUICK_EXIT and not profiled:
        _leave(code)
    sys.exit(code)


# The extra that brings each optional package (pyproject.toml's optional-dependencies); the packages
# every install has are named with the plain install.
EXTRAS = {"pyspark": "spark", "pyarrow": "spark", "pandas": "spark", "venv_pack": "spark", "py4j": "spark",
          "fastavro": "schemas", "google": "schemas", "grpc_tools": "schemas"}


def missing_package(module: str) -> str:
    """What to install when ``module`` could not be imported: one line."""
    top = module.split(".")[0]
    extra = EXTRAS.get(top)
    install = f"pip install 'kinspect[{extra}]'" if extra else "pip install --force-reinstall kinspect"
    return (f"this needs the Python package {top!r}, which is not installed where kinspect runs "
            f"({sys.executable}): {install}")


def _leave(code: int) -> None:
    """Flush what was written and end the process now, skipping Python's tear-down (its cost:
    tests/bench/README.md, "Tuning history")."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left: as above, nothing more to say
        _quiet_stdout()
    except (OSError, ValueError) as e:
        print(f"kinspect: could not write the output: {escape(str(e))}", file=sys.stderr)
        code = EXIT_UNFINISHED
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit raises nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


__all__ = ["cli", "main", "EXIT_USAGE"]
