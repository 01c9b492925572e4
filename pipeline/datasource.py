"""The ``kgate`` Spark data source: Spark's Kafka source and sink, spoken from Python.

Spark builds this object from the query's options and pickles it to its Python
workers, so it holds options only; brokers are reached from the readers and writers,
inside the workers. Options are checked where Spark first hands them over (planning),
so a mistake fails the query before any task runs, with the message alone.
"""
from pyspark.sql.datasource import DataSource

from . import FORMAT
from .errors import reported_alone
from .options import include_headers, parse_read, parse_write
from .sink import HEADERS_TYPE, BatchWriter, StreamWriter
from .source import BatchReader, StreamReader

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")


class KgateDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    @reported_alone
    def schema(self) -> str:
        """Spark's Kafka source schema; ``headers`` only with ``includeHeaders``, as there."""
        if include_headers(self.options):
            return f"{SCHEMA}, headers {HEADERS_TYPE}"
        return SCHEMA

    @reported_alone
    def reader(self, schema) -> BatchReader:
        return BatchReader(parse_read(self.options, streaming=False), schema)

    @reported_alone
    def streamReader(self, schema) -> StreamReader:
        return StreamReader(parse_read(self.options, streaming=True), schema)

    @reported_alone
    def writer(self, schema, overwrite: bool) -> BatchWriter:
        return BatchWriter(parse_write(self.options), schema, overwrite)

    @reported_alone
    def streamWriter(self, schema, overwrite: bool) -> StreamWriter:
        return StreamWriter(parse_write(self.options), schema, overwrite)
