"""Consumer groups from __consumer_offsets: partition-for, broker-faithful replay, sources."""
