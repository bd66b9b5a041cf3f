"""The package's layers depend on each other in one direction only (DESIGN.md):

structures -> attention -> encoders (hf, seq2seq beside them) -> tasks -> training -> probes -> experiments,
with the CLI and the installed contract kit (``testing``) on top. Every ``import`` of a structattn module,
module-level or inside a function, is checked.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "structattn"
#: Rank of each top-level part of the package; a module may import only parts of lower or equal rank.
RANK = {
    "registry": 0, "progress": 0, "command_line": 0, "calls": 0, "_lazy": 0, "__init__": 0,
    "structures": 1,
    "attention": 2,
    "encoders": 3,
    "hf": 4, "seq2seq": 4,
    "tasks": 5,
    "training": 6,
    "probes": 7,
    "plugins": 8, "experiments": 8,
    "testing": 9, "cli": 9, "api": 9,
}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _edges(package: Path = PACKAGE):
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        source = _part(".".join(rel.parts))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target == "structattn" or target.startswith("structattn."):
                    yield str(rel), source, _part(target), node.lineno


def test_every_part_has_a_rank():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert parts <= set(RANK), f"give these parts of the package a layer rank: {sorted(parts - set(RANK))}"


def upward_imports(package: Path = PACKAGE) -> list[str]:
    return [f"{module}:{line} ({source}) imports {target}" for module, source, target, line in _edges(package)
            if RANK.get(target, 99) > RANK.get(source, 99)]


def test_no_upward_imports():
    upward = upward_imports()
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


@pytest.mark.parametrize("source,target", [("structures", "attention"), ("training", "probes"), ("tasks", "training")])
def test_the_check_flags_an_upward_edge(tmp_path, source, target):
    fake = tmp_path / "structattn" / source
    fake.mkdir(parents=True)
    (fake / "thing.py").write_text(f"def f():\n    from structattn.{target}.x import y\n")
    assert upward_imports(tmp_path / "structattn") == [f"structattn/{source}/thing:2 ({source}) imports {target}"]


# -- modules share public names only, and no package's modules import each other in a circle -------------------

def _module_name(path: Path, package: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST):
    """Import statements that run (module level or inside functions), not those under ``if TYPE_CHECKING:``."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skipped]


def _modules(package: Path) -> dict[str, ast.AST]:
    return {_module_name(p, package): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(package.rglob("*.py"))}


def private_imports(package: Path = PACKAGE) -> list[str]:
    """``from a.b import _name`` of a name (not a module) defined in another module."""
    modules = _modules(package)
    found = []
    for name, tree in modules.items():
        for node in _runtime_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("structattn"):
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and f"{node.module}.{alias.name}" not in modules and node.module != name:
                        found.append(f"{name}:{node.lineno} imports {alias.name} from {node.module}")
    return found


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Cycles among the modules of one package (``structattn.experiments.*``), through any runtime import."""
    import networkx as nx

    modules = _modules(package)
    graph = nx.DiGraph()
    for name, tree in modules.items():
        for node in _runtime_imports(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target in modules and target != name and target.rpartition(".")[0] == name.rpartition(".")[0]:
                    graph.add_edge(name, target)
    return sorted(sorted(c) for c in nx.simple_cycles(graph))


def test_no_private_names_cross_modules():
    found = private_imports()
    assert not found, "move these to a public name in the lower layer:\n" + "\n".join(found)


def test_no_import_cycles_inside_a_package():
    cycles = import_cycles()
    assert not cycles, "modules importing each other in a circle:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checks_flag_a_private_import_and_a_cycle(tmp_path):
    fake = tmp_path / "structattn" / "experiments"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "a.py").write_text("from structattn.experiments.b import _helper\n")
    (fake / "b.py").write_text("def _helper():\n    pass\n\n\ndef f():\n    from structattn.experiments import a\n")
    assert private_imports(tmp_path / "structattn") == ["structattn.experiments.a:1 imports _helper from "
                                                        "structattn.experiments.b"]
    assert import_cycles(tmp_path / "structattn") == [["structattn.experiments.a", "structattn.experiments.b"]]
