"""Layers only look down: every import in kinspect, read from the source (issue 12 item 7, issue 32
item 7), at module level or inside a function, and ``__import__``/``importlib.import_module`` of
a constant name.

Every package and top-level module sits in a tier (TIERS, lowest first; a dotted name places one
module apart from its package). A unit may import only units of lower tiers. FORBIDDEN adds what
the tiers allow but the design does not: capture knows no Kafka, live/ knows no capture, the proxy
relays without the decode pipeline.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kinspect"

TIERS = [
    {"__version__", "addresses", "cache", "generated", "inputs", "limits", "native", "problems",
     "render.safe"},
    {"capture", "records"},  # packets and streams; record batches and codecs
    {"wire", "tls", "render.jsonl"},  # Kafka's frames and bodies; TLS records; the JSON Lines encoder
    {"storage"},  # a broker's files, read through wire's structures
    {"decode"},  # the source seam's consumer: pairing, the one finish, workers
    {"groups", "schemas", "validate", "live", "proxy"},  # libraries over finished exchanges or files
    {"doctor", "render"},  # checks over groups' replay; presentation of everything below
    {"report", "spark"},  # whole runs: an HTML page, Spark jobs and the data source
    {"cli"},  # the commands: thin, over everything
    {"__main__"},
]

FORBIDDEN = {
    "capture": {"wire", "records", "storage", "render", "groups"},
    "records": {"wire"},
    "live": {"capture", "storage"},
    "proxy": {"decode", "storage", "render", "live", "tls"},
    "schemas": {"capture", "doctor", "render"},
}


def tier_of(unit: str) -> int:
    for index, tier in enumerate(TIERS):
        if unit in tier:
            return index
    raise KeyError(unit)


def unit_of(dotted: str) -> str:
    """The unit a dotted module name belongs to: the module itself when TIERS names it apart."""
    parts = dotted.split(".")
    if len(parts) > 2 and f"{parts[1]}.{parts[2]}" in set().union(*TIERS):
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    return bool(parts) and (PACKAGE.joinpath(*parts).with_suffix(".py").exists()
                            or PACKAGE.joinpath(*parts).is_dir())


def _imported(node: ast.AST) -> list[str]:
    """The dotted kinspect modules one node imports (``from m import name``: m.name when that is
    a module, else m)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        found = []
        for alias in node.names:
            dotted = f"{node.module}.{alias.name}"
            found.append(dotted if _is_module(dotted) or node.module == "kinspect" else node.module)
        return found
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name in ("__import__", "import_module") and isinstance(node.args[0].value, str):
            return [node.args[0].value]
    return []


def imports(path: Path, text: str | None = None) -> set[str]:
    """The units ``path`` (or ``text`` as if it were that file) imports, but its own."""
    own = unit_of(module_of(path))
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    return {unit_of(dotted) for node in ast.walk(tree) for dotted in _imported(node)
            if dotted.startswith("kinspect.")} - {own}


def module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return "kinspect." + ".".join(p for p in rel.parts if p != "__init__")


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != PACKAGE / "__init__.py")


def test_every_package_and_module_has_a_tier():
    units = {unit_of(module_of(p)) for p in sources()}
    placed = set().union(*TIERS)
    assert sorted(units - placed) == []
    assert sorted(u for u in placed - units if "." not in u and u != "__version__") == []


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layers_only_look_down(path):
    unit = unit_of(module_of(path))
    mine = tier_of(unit)
    upward = sorted(u for u in imports(path) if u in set().union(*TIERS) and tier_of(u) >= mine)
    forbidden = sorted(u for u in imports(path) if u.split(".")[0] in FORBIDDEN.get(unit, ()))
    assert (upward, forbidden) == ([], [])


def test_storage_uses_no_private_name_of_wire():
    wrong = []
    for path in sorted((PACKAGE / "storage").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kinspect.wire"):
                wrong += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
        if "messages._" in path.read_text():
            wrong.append(f"{path.name}: messages._*")
    assert wrong == []


def test_a_planted_back_import_is_caught():
    """The test can fail: wire's frames.py importing the decode package inside a function."""
    planted = PACKAGE / "wire" / "frames.py"
    text = planted.read_text() + "\n\ndef _planted():\n    from kinspect.decode import pipeline\n"
    assert "decode" in imports(planted, text) and tier_of("decode") >= tier_of("wire")
    assert "decode" not in imports(planted)


def module_imports(path: Path) -> set[str]:
    """The kinspect modules ``path`` imports (at any depth of the code), but itself."""
    own = module_of(path)
    return {dotted for node in ast.walk(ast.parse(path.read_text(), str(path))) for dotted in _imported(node)
            if dotted.startswith("kinspect.") and _is_module(dotted) and dotted != own}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or round a loop (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in graph:
                continue
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_one_that_imports_it_back():
    """No import circle between modules, not even one broken by an import inside a function
    (issue 32 item 6: pump and relay, job and progress were such circles)."""
    graph = {module_of(p): module_imports(p) for p in sources()}
    assert circles(graph) == []


def test_a_circle_is_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
