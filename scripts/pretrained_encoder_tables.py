"""Regenerate the pretrained-encoder translation table (docs/translation.md, README): all-MiniLM-L6-v2 under our
decoder against our from-scratch encoder, each with and without a dependency soft_bias, on Multi30k En->De.

    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/pretrained_encoder_tables.py runs/m30k_pretrained_quick
    python scripts/pretrained_encoder_tables.py runs/m30k_pretrained_quick --tables-only   # print, run nothing

Steps (each printed before it runs; a finished step is reused, nothing is overwritten):

1. ``structattn compare configs/experiments/multi30k_pretrained_encoder_quick.gin --out FOLDER`` (12 runs, about
   an hour of an idle 2-core CPU with two ``--shard i/2`` processes at one thread each; skipped when
   ``FOLDER/results.md`` exists; a folder of shards is merged with ``structattn merge FOLDER`` instead, into
   ``FOLDER/merged``). ``--config`` runs another config of the same four settings (e.g. the shared budget's
   ``multi30k_pretrained_encoder.gin``, ~50 h here).
2. ``FOLDER[/merged]/contrasts.md``: the four contrasts a reader asks about, each pooled over the seeds (paired
   bootstrap over test sentences, cluster-resampled across seeds, ``structattn.experiments.results``), with
   Holm's correction over all four contrasts and every metric together (more conservative than each
   reference's own table in ``results.md``):
   soft_bias vs none for each encoder, and MiniLM vs scratch with and without soft_bias.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling comparison_folder.py, however this is loaded
from comparison_folder import results_folder  # noqa: E402
CONFIG = ROOT / "configs" / "experiments" / "multi30k_pretrained_encoder_quick.gin"
#: (setting, reference) of every contrast, in table order.
CONTRASTS = [
    ("scratch+soft_bias(dep)", "scratch"),
    ("minilm+soft_bias(dep)", "minilm"),
    ("minilm", "scratch"),
    ("minilm+soft_bias(dep)", "scratch+soft_bias(dep)"),
]


def contrast_rows(records: list[dict]) -> list:
    """The pooled significance rows of :data:`CONTRASTS` (every metric), Holm-adjusted over all of them."""
    from dataclasses import replace

    from structattn.experiments.results import significance
    from structattn.experiments.significance import holm

    rows = []
    for setting, reference in CONTRASTS:
        pair = [r for r in records if r["setting"] in (setting, reference)]
        missing = {setting, reference} - {r["setting"] for r in pair}
        if missing:
            raise SystemExit(f"pretrained_encoder_tables: no runs of {sorted(missing)} in the records")
        for tested in significance(pair, reference).values():
            if tested.error:
                raise SystemExit(f"pretrained_encoder_tables: {setting} vs {reference}: {tested.error}")
            rows += [r for r in tested.pooled() if r.result is not None]
    adjusted = holm([r.result.p for r in rows])
    return [replace(r, p_holm=p) for r, p in zip(rows, adjusted)]


def markdown(rows: list, records: list[dict]) -> str:
    from structattn.experiments.significance import paired_detectable_effect

    seeds = sorted({r["seed"] for r in records})
    lines = ["# Contrasts", "",
             f"Pooled over seeds {seeds} (paired bootstrap over the {rows[0].result.n_items} test sentences, "
             f"clusters across seeds); p Holm over all {len(rows)} rows. A difference is claimed (**bold**) only "
             "where p Holm < 0.05; elsewhere the last column says how large a difference this data could detect.",
             "", "| setting | against | metric | difference | 95% CI | p | p Holm | detectable |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        res = r.result
        diff = f"{res.diff:+.2f}"
        lines.append(f"| {r.setting} | {r.reference} | {r.metric} | {f'**{diff}**' if r.significant else diff} | "
                     f"[{res.ci_low:+.2f}, {res.ci_high:+.2f}] | {res.p:.3f} | {r.p_holm:.3f} | "
                     f"{paired_detectable_effect(res):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the comparison's --out folder")
    parser.add_argument("--config", type=Path, default=CONFIG, help="the config step 1 runs when the folder is empty")
    parser.add_argument("--tables-only", action="store_true", help="print the finished tables, run nothing")
    args = parser.parse_args(argv)
    if args.tables_only:
        found = [p for p in (args.folder / "contrasts.md", args.folder / "merged" / "contrasts.md") if p.is_file()]
        if not found:
            print(f"pretrained_encoder_tables: no contrasts.md under {args.folder}; run without --tables-only",
                  file=sys.stderr)
            return 2
        print((found[0].parent / "results.md").read_text())
        print(found[0].read_text())
        return 0
    folder = results_folder(args.folder, args.config)
    from structattn.experiments.records import load_records

    records = load_records(folder)
    if not records:
        print(f"pretrained_encoder_tables: no run records under {folder}", file=sys.stderr)
        return 2
    text = markdown(contrast_rows(records), records)
    (folder / "contrasts.md").write_text(text)
    print((folder / "results.md").read_text())
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
