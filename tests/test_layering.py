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
    "registry": 0, "progress": 0, "calls": 0, "_lazy": 0, "__init__": 0,
    "structures": 1,
    "attention": 2,
    "encoders": 3,
    "hf": 4, "seq2seq": 4,
    "tasks": 5,
    "training": 6,
    "probes": 7,
    "plugins": 8, "experiments": 8,
    "testing": 9, "cli": 9,
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
