"""cli/output.py's write_lines: a worker's lines written with os.writev, whole and in order."""

from __future__ import annotations

import io
import os
import threading

from kinspect.cli import output
from kinspect.cli.output import Output, writev_all


def _drain(fd: int, into: bytearray) -> threading.Thread:
    def read():
        while chunk := os.read(fd, 4096):  # small reads: the writer's writev comes back partial
            into.extend(chunk)
    thread = threading.Thread(target=read)
    thread.start()
    return thread


def test_writev_all_goes_on_after_partial_writes_and_past_iov_max(monkeypatch):
    monkeypatch.setattr(output, "IOV_MAX", 7)
    real_writev, calls = os.writev, []

    def partial_writev(fd, buffers):  # as after a signal, or a socket's full send buffer: a part
        assert len(buffers) <= 7
        calls.append(len(buffers))
        head = b"".join(bytes(b) for b in buffers)[:1 + len(calls) * 7919 % 30_000]
        return real_writev(fd, [head])

    monkeypatch.setattr(os, "writev", partial_writev)
    pieces = [bytes([65 + i % 26]) * (i * 997 % 70_000) for i in range(40)] + [b"", b"end\n"]
    read_fd, write_fd = os.pipe()
    got = bytearray()
    reader = _drain(read_fd, got)
    writev_all(write_fd, pieces)
    os.close(write_fd)
    reader.join()
    os.close(read_fd)
    assert bytes(got) == b"".join(pieces)
    assert len(calls) > len(pieces) // 7  # parts, and groups of at most IOV_MAX


class _Stdout(io.TextIOWrapper):
    """A text stream over a real file, as sys.stdout is."""


def test_write_lines_keeps_order_with_lines_written_one_by_one(tmp_path):
    path = tmp_path / "out.jsonl"
    with open(path, "wb", buffering=8192) as binary:
        out = Output(as_json=True, stream=_Stdout(binary, encoding="utf-8"))
        out.write_line(b'{"a":1}\n')  # held in the BufferedWriter until write_lines flushes it
        out.write_lines([b'{"b":', b"2}\n", b'{"c":3}\n'])
        out.write_line(b'{"d":4}\n')
        out.flush()
    assert path.read_bytes() == b'{"a":1}\n{"b":2}\n{"c":3}\n{"d":4}\n'


def test_write_lines_on_a_stream_without_a_descriptor():
    stream = io.StringIO()
    Output(as_json=True, stream=stream).write_lines([b'{"x":', b'"\xc3\xa9"}\n'])
    assert stream.getvalue() == '{"x":"\u00e9"}\n'


def test_rows_are_json_lines_as_they_are_or_a_table_of_their_cells():
    rows = [{"name": "a", "n": 1}, {"name": "b", "n": 22}]
    as_json = io.StringIO()
    Output(as_json=True, stream=as_json).rows("T", rows, ["N"], cells=lambda r: {"N": r["n"]})
    assert as_json.getvalue() == '{"name":"a","n":1}\n{"name":"b","n":22}\n'
    as_table = io.StringIO()
    Output(as_json=False, stream=as_table).rows("T", rows, ["N"], cells=lambda r: {"N": r["n"]})
    assert as_table.getvalue().split() == ["T", "N", "1", "22"]


def test_a_notice_is_its_json_line_or_a_line_on_stderr(capsys):
    as_json = io.StringIO()
    Output(as_json=True, stream=as_json).notice({"type": "notice", "what": "x"})
    assert as_json.getvalue() == '{"type":"notice","what":"x"}\n'
    text = io.StringIO()
    Output(as_json=False, stream=text).notice({"type": "notice", "what": "x"})
    Output(as_json=False, stream=text).notice({"type": "notice", "what": "x"}, "kinspect: y")
    assert text.getvalue() == "" and capsys.readouterr().err == "kinspect: x\nkinspect: y\n"
