"""Human-readable lines and trees. The same text is printed plain when piped and styled by rich
on a terminal (styles are applied to whole spans, never parsed from the data). Text from the
input is escaped (render.safe) before it becomes a rich Text, which would drop some control
characters (BEL, BS, VT, FF, CR) without a trace; strings in trees are repr()'d."""

from __future__ import annotations

import datetime as _dt

from rich.text import Text

from kinspect.render.jsonl import plain
from kinspect.render.safe import escape


def clock(ts: float | None) -> str:
    """The time of day (UTC); a time no calendar date holds (a pcapng's year 58000, say) as
    the seconds since the epoch it says."""
    if ts is None:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%H:%M:%S.%f")
    except (OverflowError, OSError, ValueError):
        return f"{ts:.6f}"


def exchange_line(record: dict) -> Text:
    return Text.assemble(*exchange_parts(record))


def exchange_plain(record: dict) -> str:
    """exchange_line's text without rich (what it prints when piped): a tenth of its cost."""
    return _plain(exchange_parts(record))


def exchange_parts(record: dict) -> list:
    """A record's line as rich's assemble takes it: strings, and (text, style) pairs."""
    kind = record.get("type")
    if kind == "notice":
        return [(clock(record.get("time")), "dim"), "  ", (record.get("conn", ""), "cyan"),
                "  ", ("notice", "yellow"), escape(f" {record.get('kind', '')}: {record.get('what', '')}")]
    if kind == "orphan_response":
        return [(clock(record.get("response_time")), "dim"), "  ", (record["conn"], "cyan"),
                "  ", ("response without request", "yellow"),
                f"  #{record['correlation_id']}  {record['response_size']} bytes",
                *(("  ", (f"frame {record['response_frames'][1]}", "dim")) if record.get("response_frames") else ())]
    latency = record.get("latency_ms")
    if latency is not None:
        latency_text = (f"{latency:.3f} ms", "green" if latency < 100 else "red")
    elif record.get("response_expected") is False:
        latency_text = ("no response (acks=0)", "dim")
    else:
        latency_text = ("no response", "yellow")
    parts = [(clock(record.get("request_time")), "dim"), "  ", (record["conn"], "cyan"), "  "]
    tls = record.get("tls")
    if tls:  # decrypted with --keylog: the mark says so
        parts += [(f"[{tls.get('version', 'TLS')}]", "green"), "  "]
    parts += [
        (f"{record['api_name']} v{record['api_version']}", "bold"), f"  #{record['correlation_id']}",
        "  ", (escape(record.get("client_id") or "-"), "magenta"), "  ", latency_text,
    ]
    if record["error_codes"]:
        parts += ["  ", (",".join(record["error_codes"]), "bold red")]
    errors = [p for p in record["problems"] if p.get("severity") == "error"]
    if errors:
        parts += ["  ", (f"{len(errors)} problem(s)", "red")]
    frames = frame_span(record)
    if frames:
        parts += ["  ", (frames, "dim")]
    return parts


def frame_span(record: dict) -> str:
    """The capture's frame numbers an exchange spans, as Wireshark numbers them: its request's
    first packet to its response's last ("" when the source has no packets: the proxy)."""
    request = record.get("request_frames")
    if not request:
        return ""
    first, last = request[0], (record.get("response_frames") or request)[1]
    return f"frame {first}" if first == last else f"frames {first}-{last}"


def problem_lines(record: dict) -> list[Text]:
    return [Text.assemble(*parts) for parts in problem_parts(record)]


def problem_plain(record: dict) -> list[str]:
    return [_plain(parts) for parts in problem_parts(record)]


def _plain(parts: list) -> str:
    return "".join([part if type(part) is str else part[0] for part in parts])


def problem_parts(record: dict) -> list[list]:
    lines = []
    for p in record.get("problems") or ():
        where = f"{p['path']}: " if p.get("path") else ""
        at = f" at byte {p['offset']:#x}" if p.get("offset") is not None else ""
        style = {"error": "red", "warning": "yellow"}.get(p.get("severity"), "dim")
        lines.append(["    ", (p.get("severity", ""), style), escape(f" {where}{p['what']}{at}")])
    return lines


def tree_lines(value, indent: str = "    ", limit: int = 200) -> list[str]:
    """A decoded body as indented 'name: value' lines (records and long lists are shortened)."""
    out: list[str] = []
    _walk(plain(value), indent, out, limit)
    return out


def _scalar(value) -> str:
    if isinstance(value, dict) and set(value) == {"b64"}:
        return f"<{len(value['b64']) * 3 // 4} bytes b64 {value['b64'][:40]}…>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if len(value) <= 120 else repr(value[:117] + "…")
    return "null" if value is None else str(value)


def _walk(value, indent: str, out: list[str], limit: int) -> None:
    if isinstance(value, dict) and not (set(value) == {"b64"}):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item and not (isinstance(item, dict) and set(item) == {"b64"}):
                out.append(f"{indent}{key}:")
                _walk(item, indent + "  ", out, limit)
            else:
                out.append(f"{indent}{key}: {_scalar(item) if item != [] else '[]'}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if i >= limit:
                out.append(f"{indent}… {len(value) - limit} more")
                break
            if isinstance(item, dict) and not set(item) == {"b64"}:
                out.append(f"{indent}[{i}]")
                _walk(item, indent + "  ", out, limit)
            else:
                out.append(f"{indent}[{i}] {_scalar(item)}")
    else:
        out.append(f"{indent}{_scalar(value)}")
