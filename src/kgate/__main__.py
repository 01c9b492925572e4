"""``python -m kgate`` is the ``kgate`` command."""
import sys

from kgate.command import main

sys.exit(main())
