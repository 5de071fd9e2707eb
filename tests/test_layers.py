"""The house plan, checked: every module of kafkalog imports only from its own layer or the layers
below it (docs/architecture.md), and the import graph has no circle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "kafkalog"
# lowest first; a module may import its own layer and the ones before it. Kafka's rules sit below
# storage: they are pure decisions over plain data (segment metadata, aborted transactions) that the
# storage layer reads for them, so no rule can open a file
LAYERS = (
    ("config", "errors", "extras", "topics", "tuning"),
    ("codec",),
    ("rules",),
    ("storage",),
    ("scan",),
    ("spark",),
    ("operations",),
    ("cli", "jobs", "__main__", "api"),
)


def layer_of(module: str) -> int:
    """The rank of `kafkalog.<first>...`; the package itself (its version) is below everything."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return next(rank for rank, names in enumerate(LAYERS) if parts[1] in names)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The kafkalog modules `path` imports, at the top or inside functions."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "kafkalog":
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kafkalog")
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_module_imports_a_layer_above_its_own():
    upward = sorted(f"{m} imports {t}" for m, targets in graph().items() for t in targets if layer_of(t) > layer_of(m))
    assert upward == []


def test_the_import_graph_has_no_circle():
    edges = graph()
    modules = set(edges)

    def resolve(target: str) -> str | None:  # `from .x import y` may name a module or a name in one
        return target if target in modules else None

    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(filter(None, map(resolve, edges[node]))):
            if target == node or target == "kafkalog":
                continue
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_every_command_has_its_function_in_the_operations_layer():
    commands = {
        "compact": "compact",
        "retain": "retain",
        "purge": "purge",
        "validate": "validate_paths",
        "dump": "dump_paths",
        "txn_report": "txn_report",
        "generate": "generate_log_dir",
    }
    for module, function in commands.items():
        source = (PACKAGE / "operations" / f"{module}.py").read_text()
        assert f"\ndef {function}(" in source, f"operations/{module}.py has no {function}()"


def test_rules_open_no_file_and_start_no_spark():
    """The rules take what storage read and return decisions: an import of storage/ or spark/ (or of
    pyarrow's file systems) from rules/ is I/O creeping back in."""
    found = sorted(
        f"{m} imports {t}"
        for m, targets in graph().items()
        if m.startswith("kafkalog.rules")
        for t in targets
        if t.startswith(("kafkalog.storage", "kafkalog.spark"))
    )
    assert found == []
    for path in (PACKAGE / "rules").glob("*.py"):
        source = path.read_text()
        assert "pyarrow.fs" not in source and "open(" not in source, f"{path.name} opens files"


def test_no_class_name_is_defined_twice():
    """One noun, one class: two classes of one name in two modules send a reader to the wrong one."""
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(module_name(path))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def test_scan_never_imports_pyspark():
    """scan/ plans and decodes without Spark (any engine's tasks can run it): a pyspark import there,
    even inside a function, belongs in spark/."""
    found = []
    for path in (PACKAGE / "scan").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            found += [f"{path.name} imports {n}" for n in names if n.split(".")[0] == "pyspark"]
    assert found == []
