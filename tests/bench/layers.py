"""cProfile statistics folded into the decode pipeline's layers.

Python functions belong to the layer of their module; C built-ins (decompress, unpack_from,
bytes.decode, write...) have no module, so their time is shared among their callers' layers in
proportion to the calls' time, except for a few named for themselves (decompression, CRC,
writing output) whose cost is worth seeing apart.
"""

from __future__ import annotations

import pstats
from collections import defaultdict

LAYERS = (  # (layer, path fragments of its modules); first match wins
    ("capture reader", ("kinspect/capture/pcap.py", "kinspect/capture/pcapng.py", "kinspect/capture/source.py")),
    ("link", ("kinspect/capture/link.py",)),
    ("tcp", ("kinspect/capture/tcp.py",)),
    ("frames", ("kinspect/wire/frames.py",)),
    ("headers, pairing", ("kinspect/wire/headers.py", "kinspect/wire/exchange.py", "kinspect/wire/session.py",
                          "kinspect/wire/apis.py", "kinspect/wire/topics.py")),
    ("body decode", ("kinspect/wire/messages.py", "kinspect/wire/decoder_runtime.py",
                     "kinspect/wire/codegen.py", "kinspect/wire/layouts.py", "<kinspect ")),
    ("records", ("kinspect/records/",)),
    ("JSON encode", ("kinspect/render/jsonl.py", "/json/")),
    ("output write", ("kinspect/cli/output.py",)),
    ("pipeline, CLI", ("kinspect/decode/pipeline.py", "kinspect/cli/", "kinspect/decode/filters.py", "kinspect/decode/summary.py")),
)
OWN_LAYERS = (  # built-ins reported on their own: (layer, substrings of the built-in's name)
    ("records: decompress (C)", ("decompress",)),
    ("records: CRC (C)", ("crc32",)),
    ("output write", ("method 'write' of '_io.",)),
)
OTHER = "other (imports, start-up, click)"


def layer_of(func: tuple) -> str | None:
    """func is pstats' (filename, line, name); None for a C built-in."""
    filename, _line, name = func
    if filename == "~":
        for layer, needles in OWN_LAYERS:
            if any(n in name for n in needles):
                return layer
        return None
    for layer, fragments in LAYERS:
        if any(f in filename for f in fragments):
            return layer
    return OTHER


def by_layer(stats: pstats.Stats) -> dict[str, float]:
    """Seconds of own time per layer."""
    table = stats.stats  # func -> (primitive calls, calls, own time, cumulative, callers)
    totals: dict[str, float] = defaultdict(float)
    for func, (_cc, _nc, own, _cum, callers) in table.items():
        layer = layer_of(func)
        if layer is not None:
            totals[layer] += own
            continue
        shares = {caller: value[2] for caller, value in callers.items()}  # own time per caller
        whole = sum(shares.values())
        if not whole:
            totals[OTHER] += own
            continue
        for caller, share in shares.items():
            totals[layer_of(caller) or OTHER] += own * share / whole
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def top_functions(stats: pstats.Stats, n: int = 20) -> list[dict]:
    rows = []
    for func, (_cc, calls, own, cum, _callers) in stats.stats.items():
        filename, line, name = func
        where = name if filename == "~" else f"{filename.split('/kinspect/')[-1]}:{line}({name})"
        rows.append({"function": where, "layer": layer_of(func) or "(built-in)", "calls": calls,
                     "own_s": round(own, 3), "cumulative_s": round(cum, 3)})
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:n]
