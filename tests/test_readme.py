"""The README stays true: its examples' output is what kinspect prints today, and CI runs the
README's test command."""

import subprocess
import sys

from tests.conftest import REPO


def test_readme_examples_show_real_current_output():
    result = subprocess.run([sys.executable, "tools/readme_examples.py", "--check"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    assert "pip install . && kinspect decode pcaps/librdkafka-produce-consume.pcapng" in readme
    assert "\nbash tests/run.sh\n" in readme
    assert "bash tests/run.sh" in (REPO / ".ci/run").read_text()
