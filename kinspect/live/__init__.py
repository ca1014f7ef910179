"""Live adapters' shared parts: figures over decoded exchanges (stats.py), the rich dashboard
(dashboard.py) and the Prometheus endpoint (metrics.py). Used by sniff and, later, the proxy;
they import the pipeline's records only, never capture/: the core never imports them."""
