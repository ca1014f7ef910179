"""kinspect proxy: a relay between Kafka clients and brokers that decodes what it passes (issue 13).

relay.py (asyncio protocols, listeners, address rewriting), frames.py (header-only framing on the
relay path), rewrite.py (broker addresses in responses), tap.py (the pipe to the decoder process),
run.py (the decoder process, signals, draining)."""
