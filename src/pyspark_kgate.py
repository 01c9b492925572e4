"""Spark discovers Python data sources by module name: every top-level module called
``pyspark_*`` with a ``DefaultSource`` is registered when a session first needs a data
source. This module is how installing kgate makes ``format("kgate")`` work."""
from kgate.pipeline.datasource import KgateDataSource as DefaultSource

__all__ = ["DefaultSource"]
