"""The ``kgate`` command: the broker's own commands beside the client commands.

``serve``, ``users`` and ``storage`` act on a broker and its metadata store, so they come
from ``kgate.broker_commands``, which sees the server (``kgate.gateway``); every other
command speaks the Kafka protocol to any cluster and comes from ``kgate.cli``. This is the
one module that sees both.

A command's module is imported only when that command runs: a broker starts without the
client commands' imports (a third of its start-up), and a client command without the
broker's. ``kgate --help`` and a mistyped command import them all to list them.
"""
import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn

from kgate import cli

COMMANDS = {
    "serve": "kgate.broker_commands.serve",
    "users": "kgate.broker_commands.users",
    "storage": "kgate.broker_commands.storage",
    **cli.COMMANDS,
}


def parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of the command ``argv`` names (of every command when it names none)."""
    named = next((arg for arg in (sys.argv[1:] if argv is None else argv) if not arg.startswith("-")), None)
    modules = [COMMANDS[named]] if named in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    root = argparse.ArgumentParser(prog="kgate", description="A Kafka-protocol gateway over a shared log.")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in modules:
        module = importlib.import_module(name)
        before = set(commands.choices)
        module.add_parser(commands)
        for added in set(commands.choices) - before:
            commands.choices[added].set_defaults(run=module.run)
    _mark_leaves(root)
    return root


def _mark_leaves(node: argparse.ArgumentParser) -> None:
    """Let each command that takes no further subcommand know its own parser, so
    arguments no level recognised are reported with that command's usage, not the
    top level's (argparse hands them up to the root)."""
    children = [a for a in node._actions if isinstance(a, argparse._SubParsersAction)]
    if not children:
        node.set_defaults(command_parser=node)
    for action in children:
        for child in set(action.choices.values()):
            _mark_leaves(child)


def main(argv=None) -> int:
    args, unknown = parser(argv).parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args.run(args)


def run() -> NoReturn:
    """The ``kgate`` process: :func:`main`, then exit with its code.

    When the command loaded obstore, the process leaves without finalizing the
    interpreter, its output flushed: obstore's Rust runtime keeps worker threads that,
    still running while the interpreter finalizes, abort the process (SIGABRT or
    SIGSEGV in about 1 exit in 8 here), so a broker that shut down cleanly, or a
    ``storage check`` that found nothing, would report a crash. :func:`main` only
    returns its code, for callers that go on running (tests).
    """
    code = main()
    if "obstore" in sys.modules:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

