"""TLS between TCP reassembly and the Kafka session: a connection's ciphertext streams become
plaintext streams when an NSS key log holds its secrets (layer.py), sans-I/O throughout.

keylog.py reads and indexes the key log (keylines.py: its lines), records.py frames TLS records, handshake.py reads the hellos,
keys.py derives the record keys (TLS 1.2 PRF, TLS 1.3 HKDF) and opens records, layer.py
routes the stream events. Nothing here knows Kafka, and nothing in wire/ knows TLS.
"""

from kinspect.tls.keylog import KeyLog

__all__ = ["KeyLog"]
