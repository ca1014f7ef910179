"""Layers only look down: the imports of each package, read from the source (issue 12, item 7).

capture knows no Kafka; wire knows no capture; storage knows no rendering and uses only wire's
public names; live/ (dashboard, metrics) knows no capture; the core never imports the adapters.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kinspect"

# package -> the kinspect packages it must never import
FORBIDDEN = {
    "capture": {"wire", "records", "storage", "render", "cli", "live", "groups", "decode"},
    "wire": {"capture", "storage", "render", "cli", "live", "decode"},
    "records": {"capture", "wire", "storage", "render", "cli", "live", "decode"},
    "storage": {"capture", "render", "cli", "live", "decode"},
    "live": {"capture", "cli", "storage"},
    "render": {"cli", "live", "capture"},
    "proxy": {"cli", "storage", "render", "live"},
    "doctor": {"cli", "render", "live", "proxy", "spark"},  # reads finished exchanges and storage's events
    "schemas": {"cli", "render", "live", "proxy", "spark", "capture", "doctor"},
}


def _imports(path: Path):
    """(kinspect subpackage or module imported, the private names taken from it)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "kinspect" and len(parts) > 1:
                    yield parts[1], []
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "kinspect":
            parts = node.module.split(".")
            if len(parts) > 1:
                yield parts[1], [a.name for a in node.names if a.name.startswith("_")]
            else:
                for alias in node.names:
                    yield alias.name, []


def _modules(package: str):
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layers_only_look_down(package):
    wrong = [f"{path.relative_to(PACKAGE)} imports kinspect.{name}"
             for path in _modules(package) for name, _ in _imports(path) if name in FORBIDDEN[package]]
    assert wrong == []


def test_storage_uses_no_private_name_of_wire():
    wrong = []
    for path in _modules("storage"):
        text = path.read_text()
        for name, private in _imports(path):
            if name == "wire" and private:
                wrong.append(f"{path.name}: {private}")
        if "messages._" in text:
            wrong.append(f"{path.name}: messages._*")
    assert wrong == []


def test_the_core_never_imports_the_live_adapters():
    core = _modules("decode")
    wrong = [p.name for p in core for name, _ in _imports(p) if name in ("live", "cli")]
    assert wrong == []
