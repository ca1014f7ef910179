"""The kinspect command line: thin over the library, one module per subcommand."""

from __future__ import annotations

import sys

import click

from kinspect import __version__
from kinspect.problems import EXIT_USAGE


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kinspect")
def cli():
    """Inspect and debug Apache Kafka's wire protocol and storage.

    \b
    Exit codes: 0 fine; 1 problems found (validate, or --strict); 2 usage error;
    3 input unreadable (not a capture, missing file, unsupported link type).
    """


def _register() -> None:
    from kinspect.cli.decode import decode
    from kinspect.cli.dump import dump
    from kinspect.cli.offsets import offsets
    from kinspect.cli.validate import validate

    for command in (decode, dump, offsets, validate):
        cli.add_command(command)


_register()


def main() -> None:
    try:
        cli.main(prog_name="kinspect", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)


__all__ = ["cli", "main", "EXIT_USAGE"]
