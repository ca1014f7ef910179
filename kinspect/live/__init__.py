"""Live adapters' shared parts: the loop that finishes and shows a live run's records (loop.py),
figures over decoded exchanges (stats.py), the rich dashboard (dashboard.py) and the Prometheus
endpoint (metrics.py). Used by sniff and the proxy's decoder; they take the pipeline's records
only, never capture/, and never the CLI: the core never imports them."""
