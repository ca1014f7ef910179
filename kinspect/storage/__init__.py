"""Storage: every file a Kafka broker writes, read from bytes (no I/O but mapped.py).

segment.py walks .log segments and KRaft snapshots past damage; index.py, snapshot.py,
txnindex.py and checkpoints.py read the other files; offsets_records.py,
transaction_state.py, share_state.py and cluster_metadata.py decode internal topics' records
(structs.py compiles their schemas with the wire's code generator); dump.py turns a file into
events, which kinspect/render/ shows (dump_output.py).
"""
