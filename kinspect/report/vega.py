"""A chart of the model as a Vega-Lite spec and its rows: the page hands the rows to the view's
"points" data set. Times are drawn on UTC scales with UTC labels."""

from __future__ import annotations

WIDTH, HEIGHT = 880, 240
SMALL_WIDTH, SMALL_HEIGHT, SMALL_COLUMNS = 250, 110, 3  # "histograms": one small chart per series
DATA = "points"
_TIME_AXIS = {"format": "%Y-%m-%d %H:%M:%S", "labelOverlap": True}  # a utc scale labels in UTC
_TOOLTIP_TIME = {"timeUnit": "utcyearmonthdatehoursminutessecondsmilliseconds",
                 "format": "%Y-%m-%d %H:%M:%S.%L UTC"}


EXTRA = {"histogram": ("x2",), "histograms": ("x2",),
         "rounds": ("x2", "generation", "joined", "left", "pause_ms", "label")}


def columns(chart: dict) -> dict:
    """The chart's points as columns: series names once ("names"), then per point its series'
    index "s", "x", "y" and, by mark, "x2" and a round's facts ("extra" names them). The page
    turns them back into one row per point, names in place of indexes (rows() here does the same)."""
    extra = EXTRA.get(chart["mark"], ())
    out = {"names": [], "s": [], "x": [], "y": [], "extra": list(extra), **{k: [] for k in extra}}
    for index, series in enumerate(chart["series"]):
        out["names"].append(series["name"])
        for point in series["points"]:
            out["s"].append(index)
            out["x"].append(point[0])
            out["y"].append(point[1])
            for at, key in enumerate(extra, 2):
                out[key].append(point[at])
    return out


def rows(chart: dict) -> list[dict]:
    """One row per point, as the page's script makes them from columns()."""
    data = columns(chart)
    return [{"s": data["names"][s], "x": x, "y": y, **{k: data[k][i] for k in data["extra"]}}
            for i, (s, x, y) in enumerate(zip(data["s"], data["x"], data["y"]))]


def spec(chart: dict) -> dict:
    x, y = _channel("x", chart["x"]), _channel("y", chart["y"])
    color = {"field": "s", "type": "nominal", "title": "series", "sort": None, "scale": {"scheme": "category20"},
             "legend": {"orient": "right", "labelLimit": 260}}
    tooltip = [{"field": "s", "type": "nominal", "title": "series"},
               _tip("x", chart["x"]), _tip("y", chart["y"])]
    base = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "width": WIDTH, "height": HEIGHT,
            "data": {"name": DATA}, "config": {"font": "sans-serif"}}
    mark = chart["mark"]
    if mark == "line":
        return {**base, "mark": {"type": "line", "point": {"size": 16}, "strokeWidth": 1.5},
                "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip}}
    if mark == "bar":
        return {**base, "mark": {"type": "bar", "width": {"band": 0.6}},
                "encoding": {"x": {**x, "sort": None}, "y": y, "tooltip": tooltip}}
    if mark == "histogram":
        return {**base, "mark": {"type": "bar", "opacity": 0.6, "binSpacing": 0},
                "encoding": {"x": x, "x2": {"field": "x2"}, "y": {**y, "stack": None}, "y2": {"datum": 0},
                             "color": color,
                             "tooltip": tooltip + [{"field": "x2", "type": "quantitative", "title": "up to"}]}}
    if mark == "histograms":  # a facet: one small chart per series, each with its own count scale
        bars = {"mark": {"type": "bar", "binSpacing": 0},
                "encoding": {"x": x, "x2": {"field": "x2"}, "y2": {"datum": 0},
                             "y": {**y, "stack": None, "axis": {"tickMinStep": 1, "format": "~s"}},
                             "color": {**color, "legend": None},
                             "tooltip": tooltip + [{"field": "x2", "type": "quantitative", "title": "up to"}]}}
        return {key: value for key, value in base.items() if key not in ("width", "height")} | {
            "facet": {"field": "s", "type": "nominal", "title": None, "sort": None,
                      "header": {"labelLimit": SMALL_WIDTH, "labelFontSize": 12, "labelFontWeight": "bold"}},
            "columns": SMALL_COLUMNS, "spec": {"width": SMALL_WIDTH, "height": SMALL_HEIGHT, **bars},
            "resolve": {"scale": {"y": "independent"}, "axis": {"x": "independent"}}}
    if mark == "rounds":
        tip = tooltip + [{"field": "x2", "type": "temporal", "title": "assigned", **_TOOLTIP_TIME},
                         {"field": "generation", "type": "quantitative"},
                         {"field": "joined", "type": "quantitative"}, {"field": "left", "type": "quantitative"},
                         {"field": "pause_ms", "type": "quantitative", "title": "without assignment (ms)"}]
        shared = {**x, "scale": {"type": "utc"}}  # one layer sets the domain: layers' domains would be merged
        return {**base, "layer": [
            {"mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1, "opacity": 0.6},
             "encoding": {"x": shared, "y": y, "color": color}},
            {"mark": {"type": "rule", "strokeWidth": 6, "opacity": 0.5},
             "encoding": {"x": shared, "x2": {"field": "x2"}, "y": y, "color": color, "tooltip": tip}},
            {"mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {"x": x, "y": y, "color": color, "tooltip": tip}},
            {"mark": {"type": "text", "dy": -10, "fontSize": 10},
             "encoding": {"x": shared, "y": y, "text": {"field": "label"}, "color": color}}]}
    raise ValueError(f"unknown mark {mark!r}")


def _channel(field: str, axis: dict) -> dict:
    kind = axis["type"]
    if kind == "time":
        scale = {"type": "utc", **({"domain": axis["domain"]} if axis.get("domain") else {})}
        return {"field": field, "type": "temporal", "title": axis["title"], "scale": scale,
                "axis": {**_TIME_AXIS, **({"format": axis["format"]} if axis.get("format") else {})}}
    if kind == "band":
        return {"field": field, "type": "nominal", "title": axis["title"], "axis": {"labelLimit": 200}}
    scale = {"type": "log"} if kind == "log" else {"zero": True}
    return {"field": field, "type": "quantitative", "title": axis["title"], "scale": scale}


def _tip(field: str, axis: dict) -> dict:
    if axis["type"] == "time":
        return {"field": field, "type": "temporal", "title": axis["title"], **_TOOLTIP_TIME}
    return {"field": field, "type": "nominal" if axis["type"] == "band" else "quantitative", "title": axis["title"]}
