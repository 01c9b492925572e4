"""Structured logging: one logfmt line per event, so logs can be grepped and parsed."""
import logging
import sys
import time


class LogfmtFormatter(logging.Formatter):
    def __init__(self, worker: int | None = None):
        """``worker``: the index of a ``serve --workers`` worker, a field of each of its lines."""
        super().__init__()
        self._worker = "" if worker is None else f" worker={worker}"

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        message = record.getMessage().replace('"', "'")
        line = (f'ts={when}.{int(record.msecs):03d}Z level={record.levelname.lower()}{self._worker} '
                f'logger={record.name} msg="{message}"')
        if record.exc_info:
            line += ' exc="' + self.formatException(record.exc_info).replace('"', "'").replace("\n", "\\n") + '"'
        return line


def configure(level: str, worker: int | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter(worker))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
