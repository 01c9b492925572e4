"""Landing: topics into Parquet, partitioned by topic and event date, exactly once.

The lake's offline readers prune by topic and by day, so files are laid out
``<output>/topic=<topic>/date=<yyyy-mm-dd>/``; the date is the record's timestamp in
UTC (event time, not landing time), so a late record lands in the day it belongs
to. Spark's file sink commits each micro-batch in its ``_spark_metadata`` log
together with the source offsets in the checkpoint: a run that stopped, however it
stopped, resumes at the first offset not yet committed, and readers of the output
never see a file from a batch that did not commit.
"""
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from . import read_stream, start

PARTITION_COLUMNS = ("topic", "date")


def event_date(timestamp: Column) -> Column:
    """The UTC calendar date of a timestamp, whatever the session's time zone."""
    return F.date_from_unix_date(F.floor(F.unix_micros(timestamp) / 86_400_000_000).cast("int"))


def landing_frame(spark: SparkSession, options: dict, source: str = "kgate") -> DataFrame:
    """The records to land, with every column of the source and their event date."""
    return read_stream(spark, options, source).withColumn("date", event_date(F.col("timestamp")))


def land(spark: SparkSession, options: dict, output: str, checkpoint: str, available_now: bool = True,
         interval_ms: int | None = None, source: str = "kgate"):
    """Start landing the topics ``options`` subscribe to into ``output``; returns the StreamingQuery."""
    writer = (landing_frame(spark, options, source).writeStream.format("parquet")
              .option("path", output).option("checkpointLocation", checkpoint)
              .partitionBy(*PARTITION_COLUMNS).outputMode("append"))
    return start(writer, available_now, interval_ms)
