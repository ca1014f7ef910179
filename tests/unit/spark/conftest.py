import pytest


@pytest.fixture(scope="session")
def spark_session():
    """One local[2] Spark for every Spark test (its JVM takes seconds to start)."""
    from kinspect.spark import job
    session = job.session("local[2]", app="kinspect tests")
    yield session
    session.stop()
