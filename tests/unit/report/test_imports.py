"""report/ sits below the command line: it reads doctor, decode's summary, storage and validate,
never cli/, live/, proxy/, spark/ or capture/ (tests/unit/test_layers.py's rule, for this package)."""

import ast
from pathlib import Path

import kinspect.report

FORBIDDEN = {"cli", "live", "proxy", "spark", "capture"}


def test_report_imports_nothing_above_or_beside_it():
    for path in Path(kinspect.report.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                parts = name.split(".")
                assert not (parts[0] == "kinspect" and len(parts) > 1 and parts[1] in FORBIDDEN), (path.name, name)
