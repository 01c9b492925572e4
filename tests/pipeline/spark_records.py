"""Spark rows of the kgate source as the records the shared read-back checks take."""
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tests.support import records as R


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
