"""Light entry points import nothing heavy: the commands' argument parsing and the parse path skip torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "torch_geometric", "numpy", "networkx", "spacy", "stanza", "matplotlib")


def loaded_after(statement: str) -> list[str]:
    code = f"import sys\n{statement}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return out.stdout.split()


@pytest.mark.parametrize("statement", [
    "import structattn.structures.annotators.commands",
    "import structattn.structures.commands",
    "import structattn.structures",
    "from structattn.structures import read_conllu, Sentence, write_conllu",
    "from structattn.structures.annotators.commands import build_parser; build_parser().format_help()",
    "from structattn.structures.commands import build_parser; build_parser().format_help()",
])
def test_no_heavy_imports(statement):
    assert loaded_after(statement) == [], f"{statement!r} imported heavy modules"


def test_providers_still_register_on_first_use():
    code = ("import structattn.structures as s, sys; assert 'torch' not in sys.modules; "
            "print(sorted(s.provider_names())[:2], s.get_provider('dependency').name, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split("]")[1].split() == ["dependency", "True"]


def test_unknown_attribute_is_an_attribute_error():
    import structattn.structures as structures

    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        structures.nonexistent  # noqa: B018
    assert "get_provider" in dir(structures)


def test_a_submodule_named_like_a_function_does_not_shadow_it():
    code = ("import structattn.structures.collate\nfrom structattn.structures import collate\n"
            "import structattn.structures as s\nprint(callable(collate), callable(s.collate))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True"]
