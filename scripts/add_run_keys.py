"""Give the run records of a folder that predate run keys the key of their run, so that ``compare --reuse`` finds
them.

    STRUCTATTN_MULTI30K=/path/to/multi30k python scripts/add_run_keys.py results/plan/a \\
        configs/experiments/multi30k_priors.gin --gin-param "compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}"

Records written before 2026-12-06 (``structattn compare`` from 653a5fe on writes ``run_key`` into each) carry no
key, and ``--reuse`` never matches a record without one. The config and ``--gin-param`` bindings must be those the
folder was run with: the comparison they declare must have the records' fingerprint, or nothing is written. Each
keyless record gets ``run_key`` and a fresh checksum, nothing else; records that carry a key are checked against
the config's and left as they are (:func:`structattn.experiments.reuse.add_run_keys`). The folder is a compare
folder, a kept one, or a folder of ``shard-i-of-N`` ones; kept records need ``STRUCTATTN_MULTI30K`` (their
references are read again when they are checked). Exits with status 2 when the folder or config is wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="compare folder, kept folder, or folder of shard folders")
    parser.add_argument("config", type=Path, help="the .gin config the folder was run with")
    parser.add_argument("--gin-param", action="append", default=[], metavar="BINDING",
                        help="a binding the folder was run with (repeatable)")
    args = parser.parse_args(argv)

    from structattn.experiments import gin_setup
    from structattn.experiments.reuse import add_run_keys

    try:
        gin_setup.parse(args.config, args.gin_param)  # FileNotFoundError: no such config file
        changed = add_run_keys(args.folder, gin_setup.compare(dry_run=True))
    except (ValueError, FileNotFoundError) as err:
        print(f"add_run_keys: {err}", file=sys.stderr)
        return 2
    for path in changed:
        print(f"added run key to {path}")
    print(f"{len(changed)} record(s) given a run key in {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
