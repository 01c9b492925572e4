"""Spark rows of the kgate source as the records the shared read-back checks take, its
schema, and waiting on the streaming queries the tests run."""
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from tests.support import records as R

# The source's schema without headers, for readers made without a session.
SOURCE_SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                            StructField("topic", StringType()), StructField("partition", IntegerType()),
                            StructField("offset", LongType()), StructField("timestamp", TimestampType()),
                            StructField("timestampType", IntegerType())])


def collect(frame: DataFrame) -> list[R.Consumed]:
    """Every row of a frame with the source's columns (``headers`` optional)."""
    columns = ["key", "value", "partition", "offset", F.unix_millis("timestamp").alias("ms")]
    if "headers" in frame.columns:
        columns.append("headers")
    out = []
    for row in frame.select(*columns).collect():
        headers = tuple((h["key"], bytes(h["value"])) for h in row["headers"] or ()) if "headers" in row else ()
        out.append(R.Consumed(row["partition"], row["offset"], bytes(row["key"]), bytes(row["value"]), headers,
                              row["ms"]))
    return out


QUERY_TIMEOUT_S = 120


def run(query) -> list[dict]:
    """Wait for an availableNow query to finish; its progress reports with rows, one per micro-batch."""
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"query still running after {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()
    return [progress for progress in query.recentProgress if progress["numInputRows"] > 0]
