"""The ``kgate`` Spark data source: Spark's Kafka source and sink, spoken from Python.

Spark builds this object from the query's options and pickles it to its Python
workers, so it holds options only; brokers are reached from the readers and writers,
inside the workers. Options are checked where Spark first hands them over (planning),
so a mistake fails the query before any task runs.
"""
from pyspark.sql.datasource import DataSource

from . import FORMAT
from .options import include_headers, parse_read, parse_write
from .sink import HEADERS_TYPE, BatchWriter, StreamWriter
from .source import BatchReader, StreamReader

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")


class KgateDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        """Spark's Kafka source schema; ``headers`` only with ``includeHeaders``, as there."""
        if include_headers(self.options):
            return f"{SCHEMA}, headers {HEADERS_TYPE}"
        return SCHEMA

    def reader(self, schema) -> BatchReader:
        return BatchReader(parse_read(self.options, streaming=False), schema)

    def streamReader(self, schema) -> StreamReader:
        return StreamReader(parse_read(self.options, streaming=True), schema)

    def writer(self, schema, overwrite: bool) -> BatchWriter:
        return BatchWriter(parse_write(self.options), schema, overwrite)

    def streamWriter(self, schema, overwrite: bool) -> StreamWriter:
        return StreamWriter(parse_write(self.options), schema, overwrite)
