"""The sharding recipe of docs/training.md works exactly as printed: its two ``--shard`` commands (both given ``--out
runs/ssan``: a shared folder, or folders copied together) and its ``structattn merge runs/ssan`` give the
table an unsharded run gives. The printed commands run as they are, with gin overrides appended that shrink
the comparison (one task, one seed, a few steps, a tiny model)."""

import shlex
from pathlib import Path

from structattn import cli

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/experiments/ssan_vs_full.gin"
TINY = ["--quiet", "--no-plots", "--threads", "1",
        "--gin-param", "compare.tasks = {'tree_depth': 'ssan_tree_depth(limit=80)'}",
        "--gin-param", "compare.seeds = [0]", "--gin-param", "compare.probes = []",
        "--gin-param", "training.max_steps = 4", "--gin-param", "training.eval_every = 2",
        "--gin-param", "training.warmup_steps = 1", "--gin-param", "model.d_model = 16",
        "--gin-param", "model.ffn_dim = 32", "--gin-param", "model.num_heads = 2", "--gin-param", "model.num_layers = 1"]


def printed_recipe() -> list[list[str]]:
    """docs/training.md's sharded-compare and merge commands, as argument lists (comments dropped)."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "docs" / "training.md").read_text().splitlines()]
    recipe = [line for line in lines if line.startswith(f"structattn compare {CONFIG} --out runs/ssan --shard")
              or line.startswith("structattn merge runs/ssan")]
    commands = [shlex.split(line)[1:] for line in recipe]
    assert [c[0] for c in commands] == ["compare", "compare", "merge"], f"docs/training.md recipe changed: {recipe}"
    return commands


def test_the_readme_sharding_recipe_as_printed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    for argv in printed_recipe():
        extra = TINY if argv[0] == "compare" else ["--no-plots"]
        assert cli.main([*argv, *extra]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "runs" / "ssan").iterdir()) == ["merged", "shard-0-of-2", "shard-1-of-2"]
    assert "merged 2 runs" in capsys.readouterr().out
    assert cli.main(["compare", CONFIG, "--out", "runs/whole", *TINY]) == 0
    for name in ("results.csv", "significance.csv", "results.md"):
        merged = (tmp_path / "runs" / "ssan" / "merged" / name).read_text()
        assert merged == (tmp_path / "runs" / "whole" / name).read_text(), name
    assert len((tmp_path / "runs" / "whole" / "results.csv").read_text().splitlines()) > 1
