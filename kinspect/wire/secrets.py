"""What is secret in Kafka's traffic, and its redaction.

Credentials that clients and brokers send travel in a few fields of a few APIs (SECRET_FIELDS).
Redaction keeps the shape: the field stays and its value becomes "<redacted N bytes>", N being
the length of what was hidden. Inside SASL tokens only the secret part goes, so a PLAIN token
keeps its user name and a SCRAM client-final message everything but its proof. A config entry's
value is secret when its name says so (secret_name), when the broker flags it is_sensitive, or
when its config_type is PASSWORD; the values of its synonyms go with it. An Envelope (KRaft's
forwarding of admin requests from a broker to the controller) carries a whole request and its
response as bytes: both go whole when that API is in the table.

Nothing in DescribeUserScramCredentials is secret: its answers hold mechanisms and iteration
counts. Redacting is the default; ``--show-secrets`` turns it off (each exchange carries the
choice to wherever its bodies are decoded, see exchange.RAW).
"""

from __future__ import annotations

import re
import struct

PASSWORD_TYPE = 9  # DescribeConfigs config_type (Kafka's ConfigType.PASSWORD)
_I16 = struct.Struct(">h")

# Kafka's PASSWORD-type configs (ConfigDef.Type.PASSWORD in Kafka 4.1's broker and client
# definitions) that neither end in ".password" nor contain "secret", and delegation.token.master.key,
# the older name of delegation.token.secret.key. A config name may carry a prefix:
# listener.name.<listener>.[<mechanism>.]<name>.
PASSWORD_CONFIGS = ("sasl.jaas.config", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                    "ssl.truststore.certificates", "sasl.oauthbearer.assertion.private.key.passphrase",
                    "delegation.token.master.key")


def redacted(size: int) -> str:
    return f"<redacted {size} bytes>"


def _size(value) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    return len(value)


def whole(value):
    """The whole value is secret (an HMAC, a salted password, a password config)."""
    if value is None:
        return None
    return redacted(_size(value))


def secret_name(name) -> bool:
    """Does a config name mark its value secret? ``*.password``, ``*sasl.jaas.config``,
    ``*secret*`` and Kafka's other PASSWORD-type configs."""
    if isinstance(name, (bytes, bytearray)):
        name = bytes(name).decode("utf-8", "replace")
    if not isinstance(name, str):
        return False
    name = name.lower()
    return (name == "password" or name.endswith(".password") or "secret" in name
            or any(name == known or name.endswith("." + known) for known in PASSWORD_CONFIGS))


def config_entry(entry):
    """A config entry (name, value, maybe is_sensitive, config_type, synonyms), in place."""
    if not isinstance(entry, dict):
        return entry
    secret = (entry.get("is_sensitive") is True or entry.get("config_type") == PASSWORD_TYPE
              or secret_name(entry.get("name")))
    if secret and entry.get("value") is not None:
        entry["value"] = whole(entry["value"])
    synonyms = entry.get("synonyms")
    if isinstance(synonyms, list):
        for synonym in synonyms:
            if isinstance(synonym, dict) and synonym.get("value") is not None and (
                    secret or secret_name(synonym.get("name"))):
                synonym["value"] = whole(synonym["value"])
    return entry


# -- SASL tokens ---------------------------------------------------------------------------------

# RFC 5802/7628's GS2 header: "n" / "y" / "p=<cb>", then "," an optional "a=<authzid>" ","
_GS2 = rb"(?:[ny]|p=[^,]*),(?:a=[^,]*)?,"
_SCRAM_CLIENT_FIRST = re.compile(_GS2 + rb"(?:m=[^,]*,)?n=")
_OAUTHBEARER = re.compile(_GS2 + rb"\x01")
_BEARER = re.compile(rb"bearer +", re.IGNORECASE)
OAUTHBEARER_ABORT = b"\x01"  # a client's answer to a broker's error challenge (RFC 7628 3.2.3)


def _as_bytes(value) -> bytes | None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    return None


def client_token(value):
    """SASL bytes from a client. PLAIN ``authzid NUL user NUL password``: the password;
    SCRAM client-final ``c=..,r=..,p=<proof>``: the proof; OAUTHBEARER ``n,,^Aauth=Bearer
    <token>^A..``: the token. A SCRAM client-first message (user and nonce) stays whole;
    anything not recognised goes whole."""
    token = _as_bytes(value)
    if not token:
        return value
    if b"\x00" in token:  # PLAIN's separators; SCRAM and OAUTHBEARER never carry NUL
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return whole(token)
        return parts[0] + b"\x00" + parts[1] + b"\x00" + redacted(len(parts[2])).encode()
    if token == OAUTHBEARER_ABORT or _SCRAM_CLIENT_FIRST.match(token):
        return value
    oauth = _OAUTHBEARER.match(token)
    if oauth:
        pairs = token[oauth.end():].split(b"\x01")
        for i, pair in enumerate(pairs):
            if pair[:5].lower() == b"auth=":
                scheme = _BEARER.match(pair, 5)
                keep = scheme.end() if scheme else 5
                pairs[i] = pair[:keep] + redacted(len(pair) - keep).encode()
        return token[:oauth.end()] + b"\x01".join(pairs)
    if token.startswith(b"c="):
        proof = token.rfind(b",p=")
        if proof >= 0:
            return token[:proof + 3] + redacted(len(token) - proof - 3).encode()
    return whole(token)


def server_token(value):
    """SASL bytes from a broker. A SCRAM server-final ``v=<signature>`` loses its signature
    (with the nonces and salt it allows guessing the password offline, as the client's proof
    does); empty answers, SCRAM server-first and errors, OAUTHBEARER's JSON error status stay;
    anything not recognised (a GSSAPI token) goes whole."""
    token = _as_bytes(value)
    if not token or token.startswith((b"r=", b"e=")) or (token[:1] == b"{" and token[-1:] == b"}"):
        return value
    if token.startswith(b"v="):
        end = token.find(b",")
        end = len(token) if end < 0 else end
        return b"v=" + redacted(end - 2).encode() + token[end:]
    return whole(token)


# -- the table -----------------------------------------------------------------------------------

SASL_AUTHENTICATE = 36
ENVELOPE = 58

# (api key, "request" / "response") → (field path, rule); "name[]" steps into each element.
SECRET_FIELDS = {
    (SASL_AUTHENTICATE, "request"): (("auth_bytes", client_token),),
    (SASL_AUTHENTICATE, "response"): (("auth_bytes", server_token),),
    (38, "response"): (("hmac", whole),),                                  # CreateDelegationToken
    (39, "request"): (("hmac", whole),),                                   # RenewDelegationToken
    (40, "request"): (("hmac", whole),),                                   # ExpireDelegationToken
    (41, "response"): (("tokens[].hmac", whole),),                         # DescribeDelegationToken
    (32, "response"): (("results[].configs[]", config_entry),),            # DescribeConfigs
    (33, "request"): (("resources[].configs[]", config_entry),),           # AlterConfigs
    (44, "request"): (("resources[].configs[]", config_entry),),           # IncrementalAlterConfigs
    (19, "request"): (("topics[].configs[]", config_entry),),              # CreateTopics
    (19, "response"): (("topics[].configs[]", config_entry),),
    (51, "request"): (("upsertions[].salt", whole),                        # AlterUserScramCredentials
                      ("upsertions[].salted_password", whole)),
}


def _steps(path: str) -> tuple[tuple[str, bool], ...]:
    return tuple((step.removesuffix("[]"), step.endswith("[]")) for step in path.split("."))


_RULES = {where: tuple((_steps(path), rule) for path, rule in fields)
          for where, fields in SECRET_FIELDS.items()}


SECRET_APIS = frozenset(api_key for api_key, _ in SECRET_FIELDS)


def redact(api_key: int, request, response) -> None:
    """Redacts the decoded bodies of one exchange in place (either may be None, or partial after
    a decode problem: redacted as far as it goes)."""
    if api_key == ENVELOPE:
        _envelope(request, response)
        return
    redact_body(api_key, "request", request)
    redact_body(api_key, "response", response)


def _envelope(request, response) -> None:
    data = request.get("request_data") if isinstance(request, dict) else None
    inner = _I16.unpack_from(data)[0] if isinstance(data, bytes) and len(data) >= 2 else None
    if inner is not None and inner not in SECRET_APIS:
        return
    for body, key in ((request, "request_data"), (response, "response_data")):
        if isinstance(body, dict) and body.get(key) is not None:
            body[key] = whole(body[key])


def redact_body(api_key: int, kind: str, body) -> None:
    """Redacts one decoded body in place, by the table."""
    rules = _RULES.get((api_key, kind))
    if rules is None or not isinstance(body, dict):
        return
    for steps, rule in rules:
        _apply(body, steps, rule)


def _apply(node, steps, rule) -> None:
    if not isinstance(node, dict):
        return
    (key, each), rest = steps[0], steps[1:]
    if key not in node:
        return
    value = node[key]
    if not each:
        if rest:
            _apply(value, rest, rule)
        else:
            node[key] = rule(value)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if rest:
                _apply(item, rest, rule)
            else:
                value[i] = rule(item)
