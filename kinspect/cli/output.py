"""One way for every command to print results: --json gives JSON Lines, otherwise rich on a
terminal and plain text when piped (sqlite-utils' output_options/output_rows idea).

Text, tables and warnings are printed with their control characters escaped (render.safe): what
came from the input never reaches the terminal raw (lines keep the tabs and newlines kinspect
laid them out with; table cells and warnings keep none). JSON needs nothing: its encoder escapes
them.

rich is imported only when something is printed through it: JSON Lines to a file or a pipe never
need it, and importing it took a sixth of such a run's start-up."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import sys
import time

import click

from kinspect.render import jsonl
from kinspect.render.safe import escape, escape_text, text_of


@functools.cache
def _console_class():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """The reader went away (| head): as for any other write, cli.main ends the run quietly
            (rich's own way exits 1, which says problems were found)."""
            self.quiet = True
            raise BrokenPipeError

    return _Console


def _may_be_terminal(stream) -> bool:
    """False only where rich's Console.is_terminal is False too: not a tty, and no variable that
    makes rich treat the stream as a terminal (TTY_COMPATIBLE, FORCE_COLOR)."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def output_options(command):
    @click.option("--json", "as_json", is_flag=True, help="JSON Lines: one object per line, for machines.")
    @functools.wraps(command)
    def wrapped(*args, as_json: bool, **kwargs):
        return command(*args, out=Output(as_json), **kwargs)
    return wrapped


# seconds before a bar is drawn, so that short runs show none (0: at every update, for tests)
DRAW_AFTER = float(os.environ.get("KINSPECT_PROGRESS_AFTER", "0.5"))
IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def writev_all(fd: int, pieces: list) -> None:
    """All of ``pieces`` to ``fd`` in order, IOV_MAX at a time, going on after partial writes."""
    pending = [memoryview(piece) for piece in pieces if len(piece)]
    while pending:
        group = pending[:IOV_MAX]
        written = os.writev(fd, group)
        done = 0
        while done < len(group) and written >= len(group[done]):
            written -= len(group[done])
            done += 1
        if done < len(group) and written:
            group[done] = group[done][written:]
        pending = group[done:] + pending[len(group):]


class Output:
    def __init__(self, as_json: bool, stream=None):
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self._console = self._err = None
        self._bar = None
        self.json_writes = 0  # calls that wrote JSON lines (record, write_line, write_lines)

    @property
    def console(self):
        if self._console is None:
            console = _console_class()
            # emoji=False: a client id ":fire:" stays those six characters
            self._console = console(file=self.stream, highlight=False, soft_wrap=True, emoji=False)
            if not self._console.is_terminal:
                self._console = console(file=self.stream, highlight=False, soft_wrap=True, width=400,
                                        no_color=True, emoji=False)
        return self._console

    @property
    def err(self):
        if self._err is None:
            self._err = _console_class()(stderr=True, highlight=False, soft_wrap=True, emoji=False)
        return self._err

    @property
    def interactive(self) -> bool:
        return _may_be_terminal(self.stream) and self.console.is_terminal

    def record(self, record: dict) -> None:
        self._clear_bar()
        self.json_writes += 1
        binary = getattr(self.stream, "buffer", None)
        if binary is not None:
            self.stream.flush()
        for piece in jsonl.pieces(record, newline=True):  # a batch too big to hold: in chunks
            if binary is not None:
                binary.write(piece)
            else:
                self.stream.write(piece.decode("utf-8"))

    def write_line(self, line: bytes) -> None:
        """A JSON line already encoded with its newline (jsonl.dumpb(..., newline=True)), as it is."""
        self._clear_bar()
        self.json_writes += 1
        binary = getattr(self.stream, "buffer", None)
        if binary is not None:
            binary.write(line)
        else:
            self.stream.write(line.decode("utf-8"))

    def write_lines(self, pieces: list) -> None:
        """Whole lines in pieces, written as they are with os.writev: a worker's megabyte of lines
        is not joined into one more copy first (parallel._flush). Text streams without a binary
        buffer get them one by one."""
        self._clear_bar()
        self.json_writes += 1
        binary = getattr(self.stream, "buffer", None)
        try:
            fd = binary.fileno() if binary is not None else None
        except (AttributeError, OSError, ValueError):  # an in-memory stream
            fd = None
        if fd is None:
            for piece in pieces:
                self.write_line(piece)
            return
        binary.flush()
        writev_all(fd, pieces)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def text(self, text) -> None:
        """One line: a str, or a rich Text with its styles."""
        self._clear_bar()
        if isinstance(text, str):
            self.console.print(escape(text, layout=True), markup=False)
        else:
            self.console.print(escape_text(text, layout=True))

    def table(self, title: str, rows: list[dict], columns: list[str]) -> None:
        """Rows as a table (rich on a terminal, aligned plain text when piped)."""
        self._clear_bar()
        from rich.table import Table

        table = Table(title=escape(title), box=None if not self.interactive else None, title_justify="left",
                      show_edge=False, pad_edge=False)
        for column in columns:
            table.add_column(column, overflow="fold",
                             justify="right" if rows and isinstance(rows[0].get(column), (int, float)) else "left")
        for row in rows:
            table.add_row(*("-" if row.get(c) is None else _cell(row.get(c)) for c in columns))
        self.console.print(table)

    def rows(self, title: str, rows: list[dict], columns: list[str], cells=None) -> None:
        """Rows as JSON lines, each as it is, or as a table of ``columns`` (``cells``, when given,
        turns a row into its table cells)."""
        if self.as_json:
            for row in rows:
                self.record(row)
        else:
            self.table(title, [cells(row) for row in rows] if cells else rows, columns)

    def notice(self, notice: dict, line: str | None = None) -> None:
        """A notice as its JSON line, or on stderr as ``line`` (by default "kinspect: " and its what)."""
        if self.as_json:
            self.record(notice)
        else:
            self.warn(f"kinspect: {notice['what']}" if line is None else line)

    def warn(self, message: str) -> None:
        self._clear_bar()
        self.err.print(escape(message), markup=False, highlight=False)

    def progress(self, total: int | None, description: str = "decoding"):
        """A progress bar on stderr when it is a terminal, and stdout goes to that terminal or to
        a file; a no-op otherwise (through a pipe, the reader's lines would reach the terminal
        between the bar's redraws)."""
        if total and _may_be_terminal(sys.stderr) and self.err.is_terminal and not _is_pipe(self.stream):
            return _Bar(total, self, description)
        return _NoBar()

    def _clear_bar(self) -> None:
        if self._bar is not None:
            self._bar.clear()


def _is_pipe(stream) -> bool:
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return escape(",".join(text_of(v) for v in value))
    return escape(text_of(value))


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, completed: int) -> None:
        pass


class _Bar:
    """One line on stderr, redrawn at most REDRAW times a second, never between output lines.

    The line ends where it starts (a carriage return, no newline). Whatever kinspect writes to
    the terminal clears it first (Output's methods, and the stream that stands for stdout while
    the bar is up), so output lines always start at column 0 and the bar is drawn again below
    them at the next update; it is gone when the work ends."""

    REDRAW = 0.1

    def __init__(self, total: int, output: "Output", description: str):
        self.total, self.output, self.description = total, output, description
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.visible = False
        self._stdout = None

    def __enter__(self):
        self.output._bar = self
        if _may_be_terminal(self.output.stream):
            self._stdout = self.output.stream
            self.output.stream = _ClearingStream(self._stdout, self)
        return self

    def __exit__(self, *exc):
        self.clear()
        self.output._bar = None
        if self._stdout is not None:
            self.output.stream = self._stdout
        return False

    def update(self, completed: int) -> None:
        now = time.monotonic()
        if now - self.drawn_at < min(self.REDRAW, DRAW_AFTER) or now - self.started < DRAW_AFTER:
            return
        self.drawn_at = now
        try:
            (self._stdout or self.output.stream).flush()  # what was written shows before the bar
            sys.stderr.write("\r" + self._line(completed, now - self.started) + "\x1b[K\r")
            sys.stderr.flush()
        except (OSError, ValueError):
            return
        self.visible = True

    def clear(self) -> None:
        if self.visible:
            self.visible = False
            try:
                sys.stderr.write("\r\x1b[2K")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass

    def _line(self, completed: int, elapsed: float) -> str:
        width = max(20, shutil.get_terminal_size(fallback=(80, 24)).columns - 1)
        completed = min(completed, self.total)
        speed = completed / elapsed if elapsed > 0 else 0.0
        left = f"{(self.total - completed) / speed:.0f} s left" if speed and completed < self.total else ""
        figures = f" {_size(completed)}/{_size(self.total)}  {_size(speed)}/s  {left}".rstrip()
        cells = max(0, min(40, width - len(self.description) - len(figures) - 2))
        filled = cells * completed // self.total if self.total else cells
        return f"{self.description} {'━' * filled}{' ' * (cells - filled)}{figures}"[:width]


def _size(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return ""


class _ClearingStream:
    """Stdout while a bar is up on the same terminal: every write clears the bar first."""

    def __init__(self, stream, bar: _Bar):
        self._stream, self._bar = stream, bar
        binary = getattr(stream, "buffer", None)
        self.buffer = _ClearingStream(binary, bar) if binary is not None else None

    def write(self, data):
        self._bar.clear()
        return self._stream.write(data)

    def __getattr__(self, name):  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)
