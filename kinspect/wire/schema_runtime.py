"""The public face of messages.py's schema compiler, for the other layers that compile Kafka
schemas of their own (storage/structs.py: coordinator and metadata records). They use these
names, never messages.py's private ones, so messages.py may change inside without breaking them.
"""

from __future__ import annotations

from kinspect.wire import messages

Layout = messages.Layout
Generator = messages._Generator       # the code generator; subclass it to add field kinds
RUNTIME = messages._RUNTIME           # the namespace generated decoders run in
resolve_fields = messages._resolve    # (fields, commons, version, flexible) -> resolved fields
short_read = messages._short          # raises the "truncated" fault of a generated decoder
run_decoder = messages._run           # (decode, buf, base, path, whole) -> (value, problems)

__all__ = ["Generator", "Layout", "RUNTIME", "resolve_fields", "run_decoder", "short_read"]
