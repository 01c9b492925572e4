"""Spark integration: the ``kgate`` PySpark data source and the pipeline jobs.

Importing this package needs no Spark, so the command line can say how to install
it; the data source is loaded only when registered or used.
"""
FORMAT = "kgate"


def register(spark) -> None:
    """Register the ``kgate`` format on ``spark`` by hand (installing the package
    registers it in every new session already)."""
    from .datasource import KgateDataSource

    spark.dataSource.register(KgateDataSource)
