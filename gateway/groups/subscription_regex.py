"""KIP-848 subscription regexes, matched as Kafka matches them: RE2 syntax, in linear time.

A consumer sends its ``SubscribedTopicRegex`` and the coordinator resolves it against
every topic name, on the event loop, at heartbeats. Kafka uses RE2/J for this, so the
expressions clients write for Kafka are RE2's; and RE2 never backtracks, so an
expression like ``(a+)+b`` against a long topic name costs time linear in the name
instead of exponential (Python's ``re`` would hold the loop for as long as the
client likes). Compilation memory is bounded too.
"""
import re2

# RE2's own default budget for a compiled expression, stated: one client's expression
# cannot make the broker allocate more than this.
MAX_COMPILED_BYTES = 8 << 20

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad expression is the client's error, answered, not logged
_OPTIONS.max_mem = MAX_COMPILED_BYTES


class InvalidRegex(ValueError):
    """Not an RE2 expression (Kafka answers INVALID_REGULAR_EXPRESSION)."""


def compile_regex(regex: str):
    """The compiled expression; InvalidRegex, saying why, when RE2 refuses it."""
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(reason) from None
