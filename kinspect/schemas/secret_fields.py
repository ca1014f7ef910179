"""Which fields of a decoded value are secrets, redacted unless --show-secrets."""

from __future__ import annotations

from kinspect.wire import secrets

_SEEN: dict[str, bool] = {}  # field names repeat: each judged once (bounded below)


def secret_field(name) -> bool:
    """Kafka's rule for config names (wire.secrets.secret_name), and field names ending in
    password (api_password, dbPassword)."""
    judged = _SEEN.get(name) if isinstance(name, str) else None
    if judged is None:
        judged = secrets.secret_name(name) or (isinstance(name, str) and name.lower().endswith("password"))
        if isinstance(name, str) and len(_SEEN) < 65536:
            _SEEN[name] = judged
    return judged
