"""kinspect on Spark: `kinspect spark` (cli/spark.py, job.py) and the data source (source.py).

``register(spark)`` makes ``spark.read.format("kinspect")`` and ``spark.readStream.format("kinspect")``
available in a session."""


def register(spark, cores: int | None = None) -> None:
    """Registers the kinspect data source in ``spark`` (source.register)."""
    from kinspect.spark.source import register as registered
    registered(spark, cores)
