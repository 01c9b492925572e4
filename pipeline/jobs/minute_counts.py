"""Per-minute counts by key, written back to a topic: the aggregate side of the pipeline.

For every (minute, topic, key) the job emits a record keyed by the original key whose
value is JSON ``{"minute": <window start, epoch ms>, "topic": ..., "key": ..., "count": n}``.
It runs in update mode: a record is emitted whenever a minute's count changes, so the
last record for a (minute, topic, key) holds its final count. Spark's Python streaming
sinks take append mode only, so each micro-batch's updates go out through the batch
writer (``foreachBatch``); a micro-batch re-run after a failure may emit its updates
twice, which the last-record-wins reading absorbs. Minutes are event time
(the record timestamps); state is kept until the watermark, ``watermark`` behind the
newest timestamp seen, passes a minute's end, and records later than that are not counted.
"""
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import FORMAT
from . import read_stream, start


def minute_counts_frame(spark: SparkSession, options: dict, watermark: str = "10 minutes",
                        source: str = "kgate") -> DataFrame:
    counts = (read_stream(spark, options, source).withWatermark("timestamp", watermark)
              .groupBy(F.window("timestamp", "1 minute"), "topic", "key").count())
    value = F.to_json(F.struct(F.unix_millis(F.col("window.start")).alias("minute"), "topic",
                               F.col("key").cast("string").alias("key"), "count"))
    return counts.select("key", value.alias("value"))


def minute_counts(spark: SparkSession, options: dict, output_topic: str, checkpoint: str,
                  available_now: bool = True, interval_ms: int | None = None, watermark: str = "10 minutes",
                  source: str = "kgate"):
    """Start counting; returns the StreamingQuery. The output goes to ``output_topic`` on
    the cluster the options read from, through the kgate data source whichever ``source`` reads."""
    sink_options = {key: value for key, value in options.items() if key.lower().startswith("kafka.")}

    def write_updates(updates: DataFrame, _batch_id: int) -> None:
        updates.write.format(FORMAT).options(**sink_options).option("topic", output_topic).mode("append").save()

    writer = (minute_counts_frame(spark, options, watermark, source).writeStream.foreachBatch(write_updates)
              .option("checkpointLocation", checkpoint).outputMode("update"))
    return start(writer, available_now, interval_ms)
