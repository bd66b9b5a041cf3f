"""One registry pattern for attention variants, structure providers, tasks, parsers and kinds of run: built-ins
load on first use, unknown names and bad options give one kind of error, a built-in name cannot be taken."""

import subprocess
import sys

import pytest

from structattn.attention import ATTENTION, StructuredAttention
from structattn.experiments.runners import RUNNERS
from structattn.structures import PROVIDERS
from structattn.structures.annotators import ANNOTATORS
from structattn.tasks import TASKS

REGISTRIES = {"attention variant": (ATTENTION, "soft_bias", {"num_heads": 2, "head_dim": 4}),
              "structure provider": (PROVIDERS, "window", {"radius": 2}),
              "task": (TASKS, "depth_tagging", {"max_depth": 3}),
              "parser": (ANNOTATORS, "spacy", {}),
              "kind of run": (RUNNERS, "encoder", {})}


@pytest.mark.parametrize("kind", REGISTRIES)
def test_unknown_names_and_bad_options_are_one_error(kind):
    registry, builtin, options = REGISTRIES[kind]
    assert registry.kind == kind and builtin in registry.names()
    with pytest.raises(ValueError, match=f"unknown {kind} 'no_such_thing'; known: .*{builtin}"):
        registry.get("no_such_thing")
    with pytest.raises(ValueError, match=rf"{kind} '{builtin}': bad options .*'no_such_option'.* it takes \("):
        registry.build(builtin, **options, no_such_option=1)
    assert type(registry.build(builtin, **options)) is registry.get(builtin)


@pytest.mark.parametrize("kind", REGISTRIES)
def test_a_built_in_name_cannot_be_taken(kind):
    registry, builtin, _ = REGISTRIES[kind]

    class Impostor:
        pass

    with pytest.raises(ValueError, match=f"{kind} '{builtin}' is already registered to .* cannot take the name"):
        registry.register(builtin)(Impostor)


def test_built_ins_load_on_first_lookup_in_a_fresh_process():
    code = ("from structattn.attention.base import ATTENTION; from structattn.tasks.base import TASKS; "
            "from structattn.structures.providers.base import PROVIDERS; "
            "assert not ATTENTION._entries and not TASKS._entries; "
            "print(len(ATTENTION.names()) > 4, 'depth_tagging' in TASKS, 'dependency' in PROVIDERS.names())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


def test_a_plugin_file_taking_a_built_in_attention_name_is_refused_naming_the_file(tmp_path, capsys):
    from structattn import cli

    plugin = tmp_path / "dup_plugin.py"
    plugin.write_text("from structattn.attention import StructuredAttention, register_attention\n\n"
                      "@register_attention('soft_bias')\nclass Mine(StructuredAttention):\n    pass\n")
    status = cli.main(["structures", "demo", "--import", str(plugin), "--limit", "2", "--quiet"])
    err = capsys.readouterr().err
    assert status == 1 and "dup_plugin.py" in err and "'soft_bias' is already registered" in err, err
    assert ATTENTION.get("soft_bias") is not None and ATTENTION.get("soft_bias").__name__ != "Mine"
    assert issubclass(ATTENTION.get("soft_bias"), StructuredAttention)
