"""The package's import graph, read from the source: no import circle, no import up the layers,
no folder over 12 modules and no module name in both ``defs/`` and ``rag/`` (docs/architecture.md's
code layout). Lazy imports inside functions count: they hide a dependency, they do not remove it."""

from __future__ import annotations

import ast
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import infra_rag_assets

pytestmark = pytest.mark.unit

PACKAGE = Path(infra_rag_assets.__file__).parent
# top-level homes, lowest first: a module may import its own home and any lower one
TOP = {"package_data": 0, "settings": 1, "rag": 2, "defs": 3, "definitions": 4, "control": 5, "cli": 6, "service": 6}
# rag/'s stages, lowest first (ground-level modules, then imports run downward)
RAG = ["versions", "common", "devices", "probabilities", "training"]
RAG += ["ingest", "operate", "index", "adapt", "answer", "search", "judge", "evaluate"]
FOLDER_LIMIT = 12


def _module(path: Path) -> str:
    parts = ["infra_rag_assets", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in PACKAGE.rglob("*.py") if "data" not in p.relative_to(PACKAGE).parts}


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (top-level, lazy and relative alike;
    ``if TYPE_CHECKING:`` blocks excepted)."""
    modules = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in _imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _imports(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _home(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _rag_stage(module: str) -> int | None:
    parts = module.split(".")
    return RAG.index(parts[2]) if len(parts) > 2 and parts[1] == "rag" and parts[2] in RAG else None


def test_no_import_runs_up_the_layers():
    upward = []
    for importer, imported in ((a, b) for a, bs in import_graph().items() for b in bs):
        home, target = _home(importer), _home(imported)
        if home in TOP and target in TOP and TOP[target] > TOP[home]:
            upward.append(f"{importer} → {imported}")
        here, there = _rag_stage(importer), _rag_stage(imported)
        if here is not None and there is not None and there > here:
            upward.append(f"{importer} → {imported} (rag stage {RAG[there]} above {RAG[here]})")
    assert not upward, "\n".join(sorted(upward))


def test_every_rag_module_has_a_stage_and_every_module_a_home():
    modules = _modules()
    homeless = [m for m in modules if _home(m) not in TOP and _home(m) not in {"", "__main__"}]
    stageless = [m for m in modules if _home(m) == "rag" and m != "infra_rag_assets.rag" and _rag_stage(m) is None]
    assert not homeless and not stageless, (homeless, stageless)


def test_no_import_circle():
    try:
        TopologicalSorter(import_graph()).prepare()
    except CycleError as exc:
        pytest.fail(f"import circle: {' → '.join(exc.args[1])}")


def test_folders_stay_small_and_layers_share_no_module_name():
    folders: dict[Path, int] = defaultdict(int)
    for path in _modules().values():
        if path.name != "__init__.py":
            folders[path.parent] += 1
    crowded = {str(f.relative_to(PACKAGE)): n for f, n in folders.items() if n > FOLDER_LIMIT}
    assert not crowded, crowded
    names = {layer: {p.stem for p in (PACKAGE / layer).rglob("*.py")} - {"__init__"} for layer in ("defs", "rag")}
    assert not names["defs"] & names["rag"], names["defs"] & names["rag"]


def test_the_graph_reader_sees_relative_and_lazy_imports():
    graph = import_graph()
    assert "infra_rag_assets.rag.probabilities" in graph["infra_rag_assets.rag.judge.support_judge"]  # relative
    assert "infra_rag_assets.rag.operate.files" in graph["infra_rag_assets.rag.answer.answerers"]  # lazy
    with pytest.raises(CycleError):  # the circle check sees a circle through three modules
        TopologicalSorter({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}).prepare()
