"""kinspect: inspect and debug Apache Kafka's wire protocol and storage."""

__version__ = "0.1.0"
