"""The page: self-contained, only its own scripts run, the input's text inert."""

import base64
import hashlib
import re

from kinspect.report.page import render, runtime

HOSTILE = "</title></script><script>alert(1)</script>\x1b[31m"


def _model(name: str) -> dict:
    chart = {"id": "lag", "title": "Lag", "mark": "line", "note": name, "x": {"title": "time (UTC)", "type": "time"},
             "y": {"title": "lag (records)", "type": "linear"}, "series": [{"name": name, "points": [[1.0, 2]]}]}
    return {"inputs": [name], "log_dir": None, "exchanges": 1, "bucket_s": 1.0, "span": ["a", "b"],
            "findings": [{"id": "finding-0", "check": "lag", "severity": "warning", "summary": name, "chart": "lag",
                          "facts": [[name, name]], "evidence": [{"time": None, "command": name}]}],
            "findings_total": 1, "notices": [name],
            "sections": [{"id": "groups", "title": "Groups", "charts": [chart],
                          "tables": [{"id": "t", "title": name, "columns": [name], "rows": [[name]]}]}]}


def test_only_the_pages_own_scripts_exist_and_the_policy_names_them():
    page = render(_model(HOSTILE), HOSTILE)
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, re.S)
    assert [attrs for attrs, _ in scripts] == [' type="application/json" id="kinspect-charts"', "", ""]
    policy = re.search(r'content="(default-src [^"]*)"', page).group(1)
    assert "default-src 'none'" in policy and "connect-src" not in policy
    for _, body in scripts[1:]:
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert "<script>alert" not in page and "</title></script>" not in page
    assert "&lt;/title&gt;&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;\\x1b[31m" in page
    assert "\x1b" not in page


def test_the_finding_links_to_its_chart():
    page = render(_model("g"))
    assert '<a href="#chart-lag">chart</a>' in page and 'id="chart-lag"' in page


def test_the_runtime_is_inlined_without_source_maps():
    assert "sourceMappingURL" not in runtime() and "</script" not in runtime().lower()
    assert "vegaLite" in runtime()
