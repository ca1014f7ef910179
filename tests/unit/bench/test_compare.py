"""tests/bench/compare.py: two result files in, the figures that got more than 10% worse out.

The result files are real ones the benchmarks wrote (tests/bench/results/), changed where a
test needs a figure to move."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.bench import compare

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
DECODE = RESULTS / "decode-bench-loopback-20261125-0202.json"
PROFILE = RESULTS / "profile-bench-loopback-20261124-2345.json"
VALIDATE = RESULTS / "validate.json"


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _row(result: dict, tool: str) -> dict:
    return next(r for r in result["rows"] if r["tool"] == tool and r["fraction"] == 1.0)


def _write(tmp_path: Path, name: str, result: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(result))
    return path


def test_a_file_against_itself_has_nothing_worse(tmp_path, capsys):
    code = compare.main([str(DECODE), str(DECODE)])
    out = capsys.readouterr().out
    assert code == 0
    assert "0 more than 10% worse" in out
    assert "kinspect 5e804ddfa9f9" in out  # the commit each file was measured at


def test_a_slower_time_is_flagged_and_exits_1(tmp_path, capsys):
    new = _load(DECODE)
    _row(new, "kinspect --json -j1")["cpu_s"] *= 1.2
    code = compare.main([str(DECODE), str(_write(tmp_path, "new.json", new))])
    out = capsys.readouterr().out
    assert code == 1
    flagged = [line for line in out.splitlines() if line.startswith("WORSE")]
    assert flagged == ["WORSE rows[fraction=1.0, tool=kinspect --json -j1].cpu_s: 1.504 -> 1.8048 (+20% worse)"]


def test_ten_percent_is_the_line(tmp_path):
    old = _load(DECODE)
    new = copy.deepcopy(old)
    _row(new, "kinspect --json")["wall_s"] *= 1.09  # within 10%
    _row(new, "tshark")["peak_rss_mb"] *= 1.11      # beyond
    worse = [c.path for c in compare.compare(old, new) if c.worse_by > 0.10]
    assert worse == ["rows[fraction=1.0, tool=tshark].peak_rss_mb"]


def test_a_lower_rate_or_ratio_is_worse_and_a_higher_is_better(tmp_path):
    old = _load(DECODE)
    new = copy.deepcopy(old)
    _row(new, "kinspect --json")["speed_vs_tshark_wall"] = 1.2    # was 1.5: worse
    _row(new, "kinspect --json -j1")["packets_per_s"] *= 2        # better
    changes = {c.path: c for c in compare.compare(old, new)}
    ratio = changes["rows[fraction=1.0, tool=kinspect --json].speed_vs_tshark_wall"]
    assert ratio.higher_is_better and ratio.worse_by == pytest.approx(0.2)
    rate = changes["rows[fraction=1.0, tool=kinspect --json -j1].packets_per_s"]
    assert rate.worse_by == pytest.approx(-1.0)


def test_rows_are_matched_by_name_not_position(tmp_path):
    old = _load(DECODE)
    new = copy.deepcopy(old)
    new["rows"].reverse()
    assert all(c.worse_by == 0 for c in compare.compare(old, new))


def test_single_runs_and_the_machine_are_not_figures():
    found = compare.figures(_load(DECODE))
    assert found and all(path.startswith("rows[") for path in found)
    assert not any("others" in path for path in found)  # the rest of the machine's load


def test_times_too_small_to_time_are_left_out():
    old = _load(PROFILE)
    new = copy.deepcopy(old)
    stage = next(s for s in new["stages"] if s["stage"] == "link")
    stage["adds_cpu_s"] = 0.04  # was 0.03: +33%, but below the 0.05 s floor
    paths = [c.path for c in compare.compare(old, new)]
    assert "stages[stage=link, layer=link].adds_cpu_s" not in paths
    assert "stages[stage=link, layer=link].cpu_s" in paths


def test_validate_results_by_command_name(tmp_path):
    old = _load(VALIDATE)
    new = copy.deepcopy(old)
    new["runs"]["kinspect validate"]["mb_per_s"] /= 2
    worse = [c.path for c in compare.compare(old, new) if c.worse_by > 0.10]
    assert worse == ["runs.kinspect validate.mb_per_s"]


def test_the_machines_differing_is_said(tmp_path, capsys):
    new = _load(DECODE)
    new["machine"]["cpu_model"] = "another CPU"
    compare.main([str(DECODE), str(_write(tmp_path, "new.json", new))])
    assert "warning: the machines differ" in capsys.readouterr().out


@pytest.mark.parametrize("content", ["not json", "[1, 2]"])
def test_unreadable_files_exit_2(tmp_path, capsys, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert compare.main([str(DECODE), str(bad)]) == 2
    assert "compare:" in capsys.readouterr().err


def test_files_with_no_figure_in_common_exit_2(tmp_path):
    assert compare.main([str(DECODE), str(VALIDATE)]) == 2


def test_a_different_input_is_said(tmp_path, capsys):
    new = _load(DECODE)
    new["capture"]["packets"] += 1  # a capture recorded again
    compare.main([str(DECODE), str(_write(tmp_path, "new.json", new))])
    out = capsys.readouterr().out
    assert "warning: the inputs differ" in out and "warning: the machines differ" not in out
