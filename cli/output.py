"""How the client commands print: tables for people, JSON for scripts, progress for terminals.

One place so every listing has the same ``--output table|json`` switch and the same
shape (a header row, columns padded to their widest cell; JSON a single document on
stdout), and so progress never reaches a pipe.
"""
import json
import sys


def add_option(parser, default: str = "table") -> None:
    parser.add_argument("--output", choices=("table", "json"), default=default,
                        help=f"table for reading, json for scripts (default {default})")


def table(columns, rows) -> None:
    """Print ``rows`` (sequences in ``columns`` order) under a header; None prints as ``-``."""
    cells = [[str(c) for c in columns]] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def document(value) -> None:
    print(json.dumps(value, indent=None, sort_keys=False))


def listing(args, columns, rows, records) -> None:
    """A table of ``rows`` or the JSON list ``records``, as ``--output`` asks."""
    if args.output == "json":
        document(records)
    else:
        table(columns, rows)


def note(text: str) -> None:
    """Something for the person at the terminal that is not the result (stderr)."""
    print(text, file=sys.stderr)


class Progress:
    """``what: done/total`` rewritten in place on stderr, only when stderr is a terminal,
    so long operations show they are alive without polluting logs or pipes."""

    def __init__(self, what: str, total: int | None = None, every: int = 1):
        self.what, self.total, self.every = what, total, every
        self.done = 0
        self.shown = sys.stderr.isatty()

    def advance(self, count: int = 1) -> None:
        before = self.done
        self.done += count
        if self.done // self.every != before // self.every or self.done == self.total:
            self._show()

    def _show(self) -> None:
        if self.shown:
            total = f"/{self.total}" if self.total is not None else ""
            sys.stderr.write(f"\r{self.what}: {self.done}{total}")
            sys.stderr.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.shown and self.done:
            self._show()
            sys.stderr.write("\n")
            sys.stderr.flush()
        return False
