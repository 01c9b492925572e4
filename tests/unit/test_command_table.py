"""``kgate``'s table of commands (kgate/command.py) names each command's module, which is
imported only when the command runs: the table must say what the modules add."""
import argparse
import importlib
import subprocess
import sys

from kgate.command import COMMANDS, parser


def test_each_module_adds_exactly_the_commands_the_table_gives_it():
    for module_name in set(COMMANDS.values()):
        commands = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module_name).add_parser(commands)
        assert set(commands.choices) == {name for name, module in COMMANDS.items() if module == module_name}


def test_a_named_command_gets_its_own_parser_and_no_name_gets_them_all():
    serve = parser(["serve", "--data-dir", "d"]).parse_args(["serve", "--data-dir", "d"])
    assert serve.command == "serve" and serve.data_dir == "d"
    listed = parser(["--help"]).format_help()
    assert all(f"    {name} " in listed for name in COMMANDS)


def test_a_broker_starts_without_the_client_commands():
    probe = ("import sys; from kgate.command import parser; parser(['serve']); "
             "print(sorted(m for m in sys.modules if m.startswith(('kgate.cli.', 'kgate.console', 'kgate.mirror'))))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"
