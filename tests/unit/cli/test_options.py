"""cli/options.py: --show-secrets declared once, so every command's help says the same."""

import click

from kinspect.cli import cli
from kinspect.cli.options import SHOW_SECRETS


def _commands(group, prefix=()):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def test_every_show_secrets_says_the_shared_text():
    found = []
    for path, command in _commands(cli):
        for param in command.params:
            if "--show-secrets" in getattr(param, "opts", ()):
                found.append(path)
                assert SHOW_SECRETS in param.help, path
    assert {("decode",), ("sniff",), ("dump",), ("validate",), ("proxy",), ("doctor",),
            ("clients",), ("report",), ("offsets", "show")} <= set(found)
