"""Charts as Vega-Lite specs and columns: every point once, time on UTC scales."""

from kinspect.report.vega import columns, rows, spec

LINE = {"id": "c", "title": "t", "mark": "line", "x": {"title": "time (UTC)", "type": "time"},
        "y": {"title": "requests/s", "type": "linear"},
        "series": [{"name": "Produce", "points": [[1000.0, 1], [2000.0, 2]]}, {"name": "<b>", "points": [[1000.0, 3]]}]}
ROUNDS = {**LINE, "mark": "rounds", "series": [{"name": "g", "points": [[1.0, 3, 2.0, 7, 1, 0, 1000.0, "gen 7 +1 -0"]]}]}


def test_columns_hold_every_point_once_and_rows_give_them_back():
    data = columns(LINE)
    assert data["names"] == ["Produce", "<b>"] and data["s"] == [0, 0, 1] and data["y"] == [1, 2, 3]
    assert rows(LINE) == [{"s": "Produce", "x": 1000.0, "y": 1}, {"s": "Produce", "x": 2000.0, "y": 2},
                          {"s": "<b>", "x": 1000.0, "y": 3}]
    assert rows(ROUNDS) == [{"s": "g", "x": 1.0, "y": 3, "x2": 2.0, "generation": 7, "joined": 1, "left": 0,
                             "pause_ms": 1000.0, "label": "gen 7 +1 -0"}]


def test_time_axes_are_utc_and_labelled():
    made = spec(LINE)
    x = made["encoding"]["x"]
    assert x["type"] == "temporal" and x["scale"] == {"type": "utc"} and x["title"] == "time (UTC)"
    assert made["encoding"]["y"]["title"] == "requests/s"
    tip = next(t for t in made["encoding"]["tooltip"] if t["field"] == "x")
    assert tip["timeUnit"].startswith("utc") and tip["format"].endswith("UTC")
    assert made["data"] == {"name": "points"}


def test_the_time_axis_spans_the_domain_given_in_the_format_given():
    made = spec({**LINE, "x": {**LINE["x"], "domain": [0.0, 5000.0], "format": "%H:%M:%S"}})
    assert made["encoding"]["x"]["scale"] == {"type": "utc", "domain": [0.0, 5000.0]}
    assert made["encoding"]["x"]["axis"]["format"] == "%H:%M:%S"
    assert spec(LINE)["encoding"]["x"]["axis"]["format"] == "%Y-%m-%d %H:%M:%S"


def test_histogram_bars_stand_on_zero():
    assert spec({**LINE, "mark": "histogram"})["encoding"]["y2"] == {"datum": 0}


def test_every_mark_has_a_spec():
    for mark in ("line", "bar", "histogram", "histograms", "rounds"):
        assert spec({**LINE, "mark": mark})["data"] == {"name": "points"}


def test_histograms_are_one_small_chart_per_series_each_with_its_count_scale():
    made = spec({**LINE, "mark": "histograms", "x": {"title": "latency (ms)", "type": "log"}})
    assert made["facet"]["field"] == "s" and made["columns"] == 3
    assert made["resolve"]["scale"] == {"y": "independent"} and "width" not in made
    inner = made["spec"]
    assert inner["encoding"]["x"]["scale"] == {"type": "log"} and inner["encoding"]["y2"] == {"datum": 0}
    assert inner["width"] < spec(LINE)["width"] / 3
