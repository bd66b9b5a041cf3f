"""The built-in variants are registered explicitly (``structattn.attention.builtin``, imported by the registry
before its first lookup), not by import-time side effects of ``structattn/attention/__init__.py``."""

from __future__ import annotations

import subprocess
import sys

BUILTIN = ["fixed_decay", "full", "hard_mask", "local_global", "soft_bias", "ssan"]


def run_fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported yet) and return its stdout."""
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_importing_the_package_registers_nothing_and_lookups_load_the_builtins():
    out = run_fresh(
        "import sys\n"
        "import structattn.attention as a\n"
        "print(sorted(m for m in sys.modules if m.startswith('structattn.attention.') and m.rsplit('.', 1)[1] in "
        f"{BUILTIN!r}))\n"
        "print(a.attention_names())\n"
    )
    loaded, names = out.splitlines()
    assert loaded == "[]", f"importing structattn.attention imported variant modules: {loaded}"
    assert names == str(BUILTIN)


def test_get_attention_and_registry_lookups_work_first():
    for expression in (
        "from structattn.attention import get_attention; print(type(get_attention('soft_bias', num_heads=2, head_dim=3)).__name__)",
        "from structattn.attention import ATTENTION; print(ATTENTION.get('soft_bias').__name__)",
        "from structattn.attention import ATTENTION; print('soft_bias' in ATTENTION and 'SoftBiasAttention')",
    ):
        assert run_fresh(expression) == "SoftBiasAttention"
