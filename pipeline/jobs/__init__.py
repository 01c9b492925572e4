"""Pipeline jobs built on the ``kgate`` data source, importable and run by ``kgate pipeline``.

Each job is a function of a SparkSession and the data source's options that starts a
streaming query and returns it, so it can run inside a larger Spark application as
well as from the command line.
"""
from pathlib import Path

from .. import FORMAT, register

# What a job reads with: the kgate data source (Python, librdkafka), or Spark's own Kafka
# connector (format("kafka"), JVM), on the same options.
SOURCES = ("kgate", "kafka")
# Spark's Kafka connector as scripts/setup-spark resolves it in a checkout (pipeline/spark-kafka/pom.xml).
CONNECTOR_JARS = Path(__file__).resolve().parents[2] / ".cache" / "spark-kafka" / "lib"
CONNECTOR_HINT = ("Spark's Kafka connector is not installed: run scripts/setup-spark in the kgate checkout "
                  "(or give --conf spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION, "
                  "VERSION being Spark's)")


class MissingConnector(Exception):
    """``--source kafka`` without Spark's Kafka connector at hand."""


def connector_conf(conf: dict, jars_dir: Path = CONNECTOR_JARS) -> dict:
    """The Spark settings that put Spark's Kafka connector on the session's classpath: none
    when the caller gives its own jars, else the checkout's (MissingConnector when absent)."""
    if "spark.jars" in conf or "spark.jars.packages" in conf:
        return {}
    jars = sorted(jars_dir.glob("*.jar"))
    if not any(jar.name.startswith("spark-sql-kafka") for jar in jars):
        raise MissingConnector(CONNECTOR_HINT)
    return {"spark.jars": ",".join(str(jar) for jar in jars)}


def session(app_name: str, master: str = "local[*]", conf: dict | None = None):
    """A SparkSession for a job run from the command line.

    Spark's Python workers run this interpreter (unless PYSPARK_PYTHON says otherwise):
    the ``python3`` Spark would pick from PATH may lack kgate and pyarrow. Dates and
    minutes are UTC whatever the machine's zone.
    """
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.sql.session.timeZone", "UTC"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def read_stream(spark, options: dict, source: str = "kgate"):
    """The streaming records ``options`` ask for, read by ``source`` (``SOURCES``). The job
    registers the data source itself, so it runs however kgate was installed (Spark's
    discovery of ``pyspark_kgate`` needs the module on a plain ``sys.path`` directory)."""
    if source == "kafka":
        return spark.readStream.format("kafka").options(**options).load()
    register(spark)
    return spark.readStream.format(FORMAT).options(**options).load()


def start(writer, available_now: bool, interval_ms: int | None):
    """Start ``writer``: drain what is there now and stop (the default), or run every ``interval_ms``."""
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{interval_ms} milliseconds").start()
