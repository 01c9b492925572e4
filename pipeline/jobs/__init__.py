"""Pipeline jobs built on the ``kgate`` data source, importable and run by ``kgate pipeline``.

Each job is a function of a SparkSession and the data source's options that starts a
streaming query and returns it, so it can run inside a larger Spark application as
well as from the command line.
"""
from .. import FORMAT, register


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


def read_stream(spark, options: dict):
    """The streaming records ``options`` ask for. The job registers the data source
    itself, so it runs however kgate was installed (Spark's discovery of
    ``pyspark_kgate`` needs the module on a plain ``sys.path`` directory)."""
    register(spark)
    return spark.readStream.format(FORMAT).options(**options).load()


def start(writer, available_now: bool, interval_ms: int | None):
    """Start ``writer``: drain what is there now and stop (the default), or run every ``interval_ms``."""
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{interval_ms} milliseconds").start()
