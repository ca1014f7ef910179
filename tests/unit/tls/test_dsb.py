"""pcapng Decryption Secrets Blocks (capture/pcapng.py keeps their bytes; the pipeline gives TLS
key logs to the TLS layer): editcap's own output, and a block that lies about its length."""

import struct
import subprocess

from kinspect.capture.pcapng import DSB, TLS_KEY_LOG, PcapngParser
from kinspect.capture.source import open_capture
from tests.conftest import PCAPS

KEYS = b"CLIENT_RANDOM " + b"ab" * 32 + b" " + b"cd" * 48 + b"\n"


def _parse(data: bytes):
    parser = PcapngParser()
    parser.feed(data)
    packets = list(parser.packets(final=True))
    return parser, packets


def test_editcap_injected_secrets_are_kept(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_bytes(KEYS)
    out = tmp_path / "with-secrets.pcapng"
    subprocess.run(["editcap", "--inject-secrets", f"tls,{keys}", str(PCAPS / "librdkafka-produce-consume.pcapng"),
                    str(out)], check=True)
    with open_capture(str(out)) as capture:
        packets = list(capture.packets())
        assert capture.secrets == [(TLS_KEY_LOG, KEYS)]
        assert not capture.problems
    with open_capture(str(PCAPS / "librdkafka-produce-consume.pcapng")) as original:
        assert len(list(original.packets())) == len(packets)


def _shb() -> bytes:
    return struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)


def _dsb(kind: int, secrets: bytes, claimed: int | None = None) -> bytes:
    padded = secrets + b"\x00" * (-len(secrets) % 4)
    length = 20 + len(padded)
    return struct.pack("<IIII", DSB, length, kind, len(secrets) if claimed is None else claimed) + padded + \
        struct.pack("<I", length)


def test_blocks_in_order_and_a_bad_one_skipped():
    parser, _ = _parse(_shb() + _dsb(TLS_KEY_LOG, KEYS) + _dsb(0x57474b4c, b"wireguard") +
                       _dsb(TLS_KEY_LOG, b"x", claimed=4096) + _dsb(TLS_KEY_LOG, b"# last\n"))
    assert parser.secrets == [(TLS_KEY_LOG, KEYS), (0x57474b4c, b"wireguard"), (TLS_KEY_LOG, b"# last\n")]
    assert len(parser.problems) == 1 and "claims 4096 bytes" in parser.problems[0].what
