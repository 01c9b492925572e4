"""Spark integration: the ``kgate`` PySpark data source and the pipeline jobs.

Importing this package needs no Spark, so the command line can say how to install
it; the data source is loaded only when registered or used.
"""
FORMAT = "kgate"


def register(spark) -> None:
    """Register the ``kgate`` format on ``spark`` by hand. Spark also finds it by
    itself in every new session where ``pyspark_kgate`` is on a ``sys.path``
    directory (an installed wheel, or the editable install of ``scripts/setup``)."""
    from .datasource import KgateDataSource

    spark.dataSource.register(KgateDataSource)
