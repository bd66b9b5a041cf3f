"""Regenerate the figures of docs/gallery.md from the shipped quickstart comparison.

    python scripts/gallery.py                           # run configs/quickstart.gin, copy its plots to docs/figures/gallery/
    python scripts/gallery.py --from runs/quickstart    # or take the plots of a finished quickstart folder
    python scripts/gallery.py --quick --out /tmp/g      # a seconds-long smoke run (tiny model, few steps): what the test runs

The figures are the ones ``structattn compare`` writes into ``DIR/plots/`` (structattn.experiments.plots): test
scores per setting (mean, std over seeds, one dot per seed, majority baseline), learning curves, the learned bias
per distance bucket and layer of the soft_bias setting, and each setting's head-averaged attention on one test
sentence with the gold tree outlined. They are copied under stable names (``GALLERY``) and each must stay under
``MAX_BYTES``. ``--quick`` shrinks the comparison with gin overrides (2 seeds, 6 steps, a 1-layer width-16
model): its figures show the layout, not the result, and are never written into docs/ unless ``--out`` says so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = "configs/quickstart.gin"
OUT = ROOT / "docs" / "figures" / "gallery"
MAX_BYTES = 200_000
# gallery name -> the file compare writes under plots/ (task "depth", settings of configs/quickstart.gin)
GALLERY = {
    "scores.png": "scores.png",
    "learning_curves.png": "learning_curves.png",
    "bias_soft_bias.png": "bias_depth_soft-bias-dep.png",
    "attention_full.png": "attention_depth_full.png",
    "attention_soft_bias.png": "attention_depth_soft-bias-dep.png",
    "attention_hard_mask.png": "attention_depth_hard-mask-dep.png",
}
QUICK = ["--gin-param", "compare.seeds = [0, 1]", "--gin-param", "training.max_steps = 6",
         "--gin-param", "training.eval_every = 3", "--gin-param", "training.warmup_steps = 1",
         "--gin-param", "model.d_model = 16", "--gin-param", "model.ffn_dim = 32",
         "--gin-param", "model.num_heads = 2", "--gin-param", "model.num_layers = 2"]


def run_comparison(folder: Path, quick: bool) -> Path:
    """Run the quickstart comparison into ``folder`` (plots included); returns its ``plots/`` folder."""
    from structattn import cli

    argv = ["compare", str(ROOT / CONFIG), "--out", str(folder), "--quiet", *(QUICK if quick else [])]
    status = cli.main(argv)
    if status != 0:
        raise SystemExit(f"structattn {' '.join(argv)} failed with status {status}")
    return folder / "plots"


def copy_figures(plots: Path, out: Path) -> list[Path]:
    """Copy the gallery's figures from a comparison's ``plots`` folder to ``out``; errors name a missing or
    too large figure."""
    missing = [source for source in GALLERY.values() if not (plots / source).is_file()]
    if missing:
        raise SystemExit(f"{plots} lacks {missing} (is it a quickstart comparison with plots?)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, source in GALLERY.items():
        size = (plots / source).stat().st_size
        if size > MAX_BYTES:
            raise SystemExit(f"{plots / source} is {size:,} bytes, over the gallery's {MAX_BYTES:,}")
        written.append(Path(shutil.copyfile(plots / source, out / name)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", help="a finished quickstart comparison folder to take the plots from")
    parser.add_argument("--quick", action="store_true", help="a tiny smoke run (layout only, seconds)")
    parser.add_argument("--out", default=str(OUT), help=f"where the figures go (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.quick and args.source:
        parser.error("--quick runs a comparison; --from reads one: give one of them")
    if args.source:
        written = copy_figures(Path(args.source) / "plots", Path(args.out))
    else:
        with tempfile.TemporaryDirectory(prefix="structattn-gallery-") as tmp:
            written = copy_figures(run_comparison(Path(tmp) / "quickstart", args.quick), Path(args.out))
    for path in written:
        print(f"{path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
