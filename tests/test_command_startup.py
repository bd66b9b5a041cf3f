"""Every command's ``--help`` answers without importing torch or transformers (issue "Speed round 2": every
``--help`` under 0.3 s; importing torch alone takes about a second)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from structattn.cli import PASS_THROUGH

HEAVY = ("torch", "transformers", "spacy", "matplotlib")


@pytest.mark.parametrize("command", [None, "train", "compare", "merge", "eval", *sorted(PASS_THROUGH)])
def test_help_imports_nothing_heavy(command):
    argv = [] if command is None else [command]
    code = ("import sys, contextlib, io\nfrom structattn.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main({argv + ['--help']!r})\n    except SystemExit:\n        pass\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == [], f"`structattn {command or ''} --help` imported {out.stdout.split()}"


def test_public_names_still_import():
    from structattn.experiments import Comparison, merge
    from structattn.hf import StructureCollator, attach, from_pretrained

    import structattn.hf.attach  # noqa: F401  (the submodule named like the function must not shadow it)
    from structattn.hf import attach as again

    assert callable(attach) and again is attach and callable(merge) and callable(from_pretrained)
    assert Comparison.__name__ == "Comparison" and StructureCollator.__name__ == "StructureCollator"
    with pytest.raises(AttributeError):
        import structattn.hf as H

        H.no_such_name  # noqa: B018
