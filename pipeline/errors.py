"""The failures the data source reports in its own words, and how Spark shows them.

These carry a message that stands on its own (it names the option or the partition
at fault), so the line a user reads first says what to change. Spark's Python worker
wraps any exception in the worker's traceback unless ``SPARK_HIDE_TRACEBACK`` is set
(``spark.sql.execution.pyspark.udf.hideTraceback.enabled``): the methods Spark calls
are wrapped in ``reported_alone``, which sets it for a PipelineError only. The worker
formats the error after it leaves our code and then exits, so the setting ends with
that process and no other failure loses its traceback.
"""
import contextlib
import functools
import inspect
import os


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


@contextlib.contextmanager
def _alone():
    try:
        yield
    except PipelineError:
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
        raise


def reported_alone(method):
    """For a data source method Spark calls in a worker (a generator too, for ``read``):
    a PipelineError it raises reaches the user as its message, without a traceback."""
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def generate(*args, **kwargs):
            with _alone():
                yield from method(*args, **kwargs)
        return generate

    @functools.wraps(method)
    def call(*args, **kwargs):
        with _alone():
            return method(*args, **kwargs)
    return call
