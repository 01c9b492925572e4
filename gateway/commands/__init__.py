"""``kgate`` subcommands other than ``serve``, one module per family of commands."""
