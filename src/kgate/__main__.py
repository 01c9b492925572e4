"""``python -m kgate`` is the ``kgate`` command."""
from kgate.command import run

run()
