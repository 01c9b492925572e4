"""The failures the data source reports in its own words.

Spark shows a worker's exception with the worker's traceback around it; these carry a
message that stands on its own (it names the option or the partition at fault), so
the line a user reads first says what to change.
"""


class PipelineError(Exception):
    """Base of every failure the kgate data source raises on purpose."""


class OptionError(PipelineError, ValueError):
    """An option is missing, malformed or contradicts another; nothing was asked of a broker."""

    def __init__(self, option: str, problem: str):
        self.option = option
        super().__init__(f"kgate option '{option}': {problem}")


class UnknownTopicError(PipelineError):
    """A topic named by ``subscribe`` or ``assign`` does not exist on the cluster."""


class DataLossError(PipelineError):
    """Offsets asked for are no longer (or not yet) in the log, and ``failOnDataLoss`` is true."""


class BrokerError(PipelineError):
    """The brokers could not be reached, refused us, or did not answer within a deadline."""
