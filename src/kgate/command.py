"""The ``kgate`` command: the broker's own commands beside the client commands.

``serve``, ``users`` and ``storage`` act on a broker and its metadata store, so they come
from ``kgate.broker_commands``, which sees the server (``kgate.gateway``); every other
command speaks the Kafka protocol to any cluster and comes from ``kgate.cli``. This is the
one module that sees both.
"""
import argparse
import logging
import os
import sys
from typing import NoReturn

from kgate import cli
from kgate.broker_commands import serve, storage, users

COMMANDS = (serve, users, storage, *cli.FAMILIES)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="kgate", description="A Kafka-protocol gateway over a shared log.")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        before = set(commands.choices)
        module.add_parser(commands)
        for name in set(commands.choices) - before:
            commands.choices[name].set_defaults(run=module.run)
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
    args, unknown = parser().parse_known_args(argv)
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

