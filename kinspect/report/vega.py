"""A chart of the model as a Vega-Lite spec and its rows: the page hands the rows to the view's
"points" data set. Times are drawn on UTC scales with UTC labels."""

from __future__ import annotations

WIDTH, HEIGHT = 880, 240
DATA = "points"
_TIME_AXIS = {"format": "%H:%M:%S", "labelOverlap": True}  # a utc scale labels in UTC
_TOOLTIP_TIME = {"timeUnit": "utcyearmonthdatehoursminutessecondsmilliseconds",
                 "format": "%Y-%m-%d %H:%M:%S.%L UTC"}


def rows(chart: dict) -> list[dict]:
    """One row per point: its series "s", "x", "y" and, by mark, "x2" and the round's facts."""
    out = []
    mark = chart["mark"]
    for series in chart["series"]:
        name = series["name"]
        for point in series["points"]:
            row = {"s": name, "x": point[0], "y": point[1]}
            if mark == "histogram":
                row["x2"] = point[2]
            elif mark == "rounds":
                row.update(x2=point[2], generation=point[3], joined=point[4], left=point[5], pause_ms=point[6])
            out.append(row)
    return out


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
        return {**base, "mark": {"type": "bar"},
                "encoding": {"x": {**x, "sort": None}, "y": y, "tooltip": tooltip}}
    if mark == "histogram":
        return {**base, "mark": {"type": "bar", "opacity": 0.6, "binSpacing": 0},
                "encoding": {"x": x, "x2": {"field": "x2"}, "y": {**y, "stack": None}, "color": color,
                             "tooltip": tooltip + [{"field": "x2", "type": "quantitative", "title": "up to"}]}}
    if mark == "rounds":
        tip = tooltip + [{"field": "x2", "type": "temporal", "title": "assigned", **_TOOLTIP_TIME},
                         {"field": "generation", "type": "quantitative"},
                         {"field": "joined", "type": "quantitative"}, {"field": "left", "type": "quantitative"},
                         {"field": "pause_ms", "type": "quantitative", "title": "without assignment (ms)"}]
        return {**base, "layer": [
            {"mark": {"type": "rule", "strokeWidth": 6, "opacity": 0.5},
             "encoding": {"x": x, "x2": {"field": "x2"}, "y": y, "color": color, "tooltip": tip}},
            {"mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {"x": x, "y": y, "color": color, "tooltip": tip}}]}
    raise ValueError(f"unknown mark {mark!r}")


def _channel(field: str, axis: dict) -> dict:
    kind = axis["type"]
    if kind == "time":
        return {"field": field, "type": "temporal", "title": axis["title"], "scale": {"type": "utc"},
                "axis": _TIME_AXIS}
    if kind == "band":
        return {"field": field, "type": "nominal", "title": axis["title"], "axis": {"labelLimit": 200}}
    scale = {"type": "log"} if kind == "log" else {"zero": True}
    return {"field": field, "type": "quantitative", "title": axis["title"], "scale": scale}


def _tip(field: str, axis: dict) -> dict:
    if axis["type"] == "time":
        return {"field": field, "type": "temporal", "title": axis["title"], **_TOOLTIP_TIME}
    return {"field": field, "type": "nominal" if axis["type"] == "band" else "quantitative", "title": axis["title"]}
