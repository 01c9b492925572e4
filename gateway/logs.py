"""Structured logging: one logfmt line per event, so logs can be grepped and parsed."""
import logging
import sys
import time


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        message = record.getMessage().replace('"', "'")
        line = (f'ts={when}.{int(record.msecs):03d}Z level={record.levelname.lower()} logger={record.name} '
                f'msg="{message}"')
        if record.exc_info:
            line += ' exc="' + self.formatException(record.exc_info).replace('"', "'").replace("\n", "\\n") + '"'
        return line


def configure(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
