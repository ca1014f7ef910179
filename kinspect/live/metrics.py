"""``--metrics-port``: the live figures on a Prometheus endpoint (prometheus_client), as
kafka-proxy, Kroxylicious and kafka-sniffer offer theirs. Each scrape reads LiveStats afresh.

Metric names (all prefixed ``kinspect_``):

- ``requests_total{api}``, ``responses_missing_total{api}``: exchanges seen, and those without
  a response (connection ended, or --pending-timeout);
- ``latency_ms{api,quantile="0.5"|"0.99"}``: over the last 10 s; ``latency_ms_sum{api}``;
- ``errors_total{api,error}``; ``client_bytes_total{client_id}``; ``topic_bytes_total{topic}``;
- ``requests_in_flight``; ``packets_total``; ``kernel_dropped_packets_total`` and
  ``kernel_received_packets_total`` (absent while the backend cannot tell);
  ``tcp_gaps_total``; ``orphan_responses_total``.
"""

from __future__ import annotations

from kinspect.live.stats import LiveStats


class _Collector:
    def __init__(self, stats: LiveStats):
        self.stats = stats

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.stats.snapshot()
        window = self.stats.window()
        requests = CounterMetricFamily("kinspect_requests", "Kafka requests seen, by API", labels=["api"])
        missing = CounterMetricFamily("kinspect_responses_missing", "Requests that got no response seen",
                                      labels=["api"])
        for api, n in snap["requests"].items():
            requests.add_metric([api], n)
            missing.add_metric([api], snap["unanswered"].get(api, 0))
        latency = GaugeMetricFamily("kinspect_latency_ms", "Request latency over the last 10 s, ms",
                                    labels=["api", "quantile"])
        for api, row in window.items():
            for q, key in (("0.5", "p50"), ("0.99", "p99")):
                if row[key] is not None:
                    latency.add_metric([api, q], row[key])
        latency_sum = CounterMetricFamily("kinspect_latency_ms_sum", "Sum of answered requests' latency, ms",
                                          labels=["api"])
        for api, total in snap["latency_sum"].items():
            latency_sum.add_metric([api], total)
        errors = CounterMetricFamily("kinspect_errors", "Error codes in responses", labels=["api", "error"])
        for (api, code), n in snap["errors"].items():
            errors.add_metric([api, code], n)
        clients = CounterMetricFamily("kinspect_client_bytes", "Request and response bytes by client id",
                                      labels=["client_id"])
        for client, n in snap["clients"]:
            clients.add_metric([str(client)], n)
        topics = CounterMetricFamily("kinspect_topic_bytes", "Bytes of exchanges naming a topic", labels=["topic"])
        for topic, n in snap["topics"]:
            topics.add_metric([str(topic)], n)
        yield from (requests, missing, latency, latency_sum, errors, clients, topics)
        yield GaugeMetricFamily("kinspect_requests_in_flight", "Requests waiting for a response",
                                value=snap["in_flight"])
        yield CounterMetricFamily("kinspect_packets", "Packets read from the capture", value=snap["packets"])
        if snap["kernel_dropped"] is not None:
            yield CounterMetricFamily("kinspect_kernel_dropped_packets", "Packets the kernel dropped",
                                      value=snap["kernel_dropped"])
        if snap["kernel_received"] is not None:
            yield CounterMetricFamily("kinspect_kernel_received_packets",
                                      "Packets the kernel's filter passed (drops included)",
                                      value=snap["kernel_received"])
        yield CounterMetricFamily("kinspect_tcp_gaps", "Holes in TCP streams (bytes never captured)",
                                  value=snap["tcp_gaps"])
        yield CounterMetricFamily("kinspect_orphan_responses", "Responses whose request was not seen",
                                  value=snap["orphans"])


def serve(stats: LiveStats, port: int, address: str = "") -> object:
    """Start the endpoint on its own thread; returns the server (``shutdown()`` ends it).
    OSError when the port cannot be bound; ImportError without prometheus_client."""
    from prometheus_client import start_http_server
    from prometheus_client.core import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(stats))
    server, _thread = start_http_server(port, addr=address or "0.0.0.0", registry=registry)
    return server
