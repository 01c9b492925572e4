"""One error type for every failure a client hears as a Kafka error code.

A batch that fails validation, a producer sequence out of order, an entry that
cannot be read, a topic operation refused, a group rule broken: each is raised as a
``KafkaError`` carrying the code and a message, in whichever layer finds it, and the
handler answering the request puts both in its response (the message where the
response version has a field for it). One type, so a handler catches one thing and
no layer turns error names back into codes.
"""
from .error_codes import ErrorCode


class KafkaError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message  # None: the code says it all
