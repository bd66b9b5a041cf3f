"""The ``structattn`` command.

    structattn train CONFIG.gin [--gin-param B ...] --out DIR [--resume | --overwrite]
    structattn compare CONFIG.gin [--gin-param B ...] --out DIR [--shard i/N] [--dask ADDRESS|local:N] [--reuse FOLDER ...] [--resume | --overwrite]
    structattn merge DIR... [--out DIR] [--overwrite]
    structattn eval CHECKPOINT [--split test]
    structattn structures ...     (structattn.structures.commands: demo, cache precompute)
    structattn parse ...          (structattn.structures.annotators.commands: spaCy / stanza parsing)

Every command is built the same way (:mod:`structattn.command_line`): its parser comes from
``command_parser`` / ``add_subcommand``, which add the shared flags ``--import MODULE_OR_FILE`` (plugin modules
or ``.py`` files imported before anything else, after the installed ``structattn.plugins`` entry points, see
:mod:`structattn.plugins`), ``--quiet`` and ``--threads N`` to every ``--help``, and ``apply_shared_flags``
applies them before the command runs. Commands with their own module (``PASS_THROUGH``) parse their own
arguments with such a parser, so ``structattn translate --help`` needs only that module.

A folder that already holds structattn outputs is refused unless ``--resume`` or ``--overwrite`` is given.
Errors print one line (``structattn <command>: error: ...``) and exit with status 1; ``--traceback`` (or
``STRUCTATTN_TRACEBACK=1``) shows the full traceback instead. Progress bars are off with ``--quiet`` or when
the ``CI`` environment variable is set.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from structattn.command_line import CommandParser, add_shared_flags, apply_shared_flags
from structattn.progress import QUIET_ENV, progress_disabled

PASS_THROUGH = {
    "structures": ("structattn.structures.commands", "structures: demo and cache precompute (see `structattn structures --help`)"),
    "parse": ("structattn.structures.annotators.commands", "parse raw text with spaCy or stanza (see `structattn parse --help`)"),
    "translate": ("structattn.experiments.translate_cli", "translate a file with a trained translation model (see `structattn translate --help`)"),
    "pretrain": ("structattn.hf.pretrain_command", "MLM-pretrain a small BERT offline on text or a treebank (see `structattn pretrain --help`)"),
    "probe": ("structattn.experiments.probe_cli", "structural probes and attention trees per layer of an HF model or a structattn checkpoint (see `structattn probe --help`)"),
}


def _quiet(args: argparse.Namespace) -> bool:
    return progress_disabled(args.quiet)


def _mode(args: argparse.Namespace) -> str:
    """What to do with an output folder that already holds outputs (see ``--resume`` / ``--overwrite``)."""
    if args.resume and args.overwrite:
        raise ValueError("give --resume or --overwrite, not both")
    return "resume" if args.resume else "overwrite" if args.overwrite else "refuse"


def _output_flags(parser: argparse.ArgumentParser, resume_help: str) -> None:
    parser.add_argument("--resume", action="store_true", help=resume_help)
    parser.add_argument("--overwrite", action="store_true",
                        help="remove the structattn outputs already in --out (listed on stderr) and start afresh")


def _gin_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the .gin config file")
    parser.add_argument("--gin-param", "--gin_param", action="append", default=[], metavar="BINDING",
                        help="an extra gin binding, e.g. --gin-param 'training.max_steps = 50' (repeatable)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the config and run every model forward once on two sentences; no training")
    add_shared_flags(parser)


def cmd_train(args: argparse.Namespace) -> int:
    from structattn import api

    record = api.train(Path(args.config), args.out, overrides=args.gin_param, mode=_mode(args), quiet=_quiet(args),
                       threads=args.threads, dry_run=args.dry_run)
    if record is None:
        print("config OK: model built and run forward")
    elif int(os.environ.get("RANK", "0")) == 0:
        metrics = ", ".join(f"{k} {v:.4f}" for k, v in record["metrics"].items())
        print(f"{record['run_id']}: {metrics} ({record['steps']} steps, {record['time_s']:.1f} s) -> {args.out}")
    return 0


#: exit status of ``compare --time-limit`` when runs are left (0: every run finished)
STOPPED_AT_TIME_LIMIT = 3


def cmd_compare(args: argparse.Namespace) -> int:
    from structattn import api

    from structattn.experiments.shards import parse_shard, shard_folder

    if args.time_limit is not None and args.time_limit.strip().startswith("-"):
        raise ValueError(f"--time-limit {args.time_limit!r} is negative: the time to stop at has already passed; "
                         "nothing was run (give the time left, e.g. --time-limit 2h40m)")
    result = api.compare(Path(args.config), args.out, overrides=list(args.gin_param), dask=args.dask, mode=_mode(args),
                         shard=args.shard, quiet=_quiet(args), plots=not args.no_plots, threads=args.threads,
                         dry_run=args.dry_run, time_limit=args.time_limit, reuse=args.reuse)
    if args.dry_run:
        print(f"config OK: {len(result.runs())} runs; every setting built and run forward")
    elif getattr(result, "left", None):
        return STOPPED_AT_TIME_LIMIT  # the line saying what is left went to stderr
    elif int(os.environ.get("RANK", "0")) == 0:
        out = shard_folder(args.out, parse_shard(args.shard))
        print((out / "results.md").read_text())
        print(f"wrote {out}/: results.csv, significance.csv, results.md, config.gin, comparison.json, "
              "provenance.json, runs/"
              + ("" if args.no_plots else ", plots/"))
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from structattn.experiments import merge

    out = args.out or str(Path(os.path.commonpath([str(Path(d).resolve()) for d in args.dirs])) / "merged")
    records = merge(args.dirs, out, plots=not args.no_plots, mode="overwrite" if args.overwrite else "refuse",
                    partial=args.partial)
    print((Path(out) / "results.md").read_text())
    from structattn.experiments.shards import shard_folders

    folders = [folder for given in args.dirs for folder in shard_folders(given)]
    print(f"merged {len(records)} runs from {len(folders)} shard folder{'s' if len(folders) != 1 else ''} "
          f"({', '.join(str(f) for f in folders)}) into {out}")
    return 0


def cmd_keep(args: argparse.Namespace) -> int:
    from structattn.experiments.keep import keep

    records = keep(args.src, args.dest, overwrite=args.overwrite, partial=args.partial)
    print(f"kept {len(records)} run record{'s' * (len(records) != 1)} of {args.src} in {args.dest} (no checkpoints, "
          "no corpus text; references are read again from the corpus when the records are read)")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from structattn.experiments import evaluate_checkpoint
    from structattn.training import load_checkpoint

    data = load_checkpoint(args.checkpoint)
    scores = evaluate_checkpoint(data, args.split, quiet=_quiet(args))
    meta = data.get("meta", {})
    print(json.dumps({"checkpoint": str(args.checkpoint), "run": meta.get("run_id"), "split": args.split, **scores}))
    return 0


def take_imports(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split ``--import X`` / ``--import=X`` (anywhere after the program name) from the other arguments,
    so every command, pass-through ones included, takes them."""
    rest, imports, k = [], [], 0
    while k < len(argv):
        arg = argv[k]
        if arg == "--":
            rest += argv[k:]
            break
        if arg == "--import":
            if k + 1 >= len(argv):
                raise ValueError("--import needs a module name or a .py file")
            imports.append(argv[k + 1])
            k += 2
            continue
        if arg.startswith("--import="):
            imports.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
        k += 1
    return rest, imports


def load_plugins(imports: list[str]) -> None:
    """Installed entry points (group ``structattn.plugins``), then the ``--import`` modules and files."""
    from structattn import plugins

    plugins.load_entry_points()
    plugins.load_plugins(imports)


def _pass_through(name: str, argv: list[str]) -> int:
    module_name, _ = PASS_THROUGH[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise RuntimeError(f"`structattn {name}` is not available: module {err.name!r} is missing") from None
    return int(module.main(argv) or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="structattn", description="Linguistic-structure priors for self-attention.")
    parser.add_argument("--traceback", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("train", help="train one model from a gin config", description="Train one model (task x attention plan x seed) from a gin config; writes checkpoints, record.json, config.gin and results tables to --out. Works under torchrun (data parallel).")
    _gin_args(p)
    _output_flags(p, "continue from OUT/checkpoints/last.pt if it exists (only max_steps, eval_every, patience and "
                     "eval_batch_size may change; other differences from the checkpoint are refused)")
    p.set_defaults(run=cmd_train)

    p = sub.add_parser("compare", help="train and compare runs declared in a gin config", description="Train every task x setting x seed declared in the config; writes results.csv, significance.csv (paired tests against the reference setting), results.md, config.gin and plots/ to --out. With --reuse FOLDER, runs identical to finished runs of another comparison are copied from it instead of trained.")
    _gin_args(p)
    _output_flags(p, "keep the finished runs in --out whose records match this comparison, continue the others "
                     "from their last.pt")
    p.add_argument("--shard", metavar="i/N", help="run only shard i of N (0-based), into OUT/shard-i-of-N/; `structattn merge OUT` merges the shards it holds")
    p.add_argument("--dask", metavar="ADDRESS|local:N", help="run every run as one Dask task on the scheduler at ADDRESS (tcp://host:8786; workers must see --out at the same path) or on a local cluster of N single-threaded worker processes (local:N); see docs/cluster.md")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--reuse", metavar="FOLDER", action="append", default=[], help="a folder of another comparison (compare folder, kept folder, or folder of shard-i-of-N ones; repeatable): a run not finished in --out whose run key (task spec, plan, seed, setup; not the labels) matches a record there is copied in, relabelled, with provenance.reused_from and its log.jsonl, instead of being trained; a match of another precision or other data, or two matches with different metrics, is refused naming both files")
    p.add_argument("--time-limit", metavar="DURATION", help="stop after DURATION (2h40m, 90m, 45s): the run in progress saves its last.pt at the step it reached, no further run starts, and the command says what is left and exits with status 3; the same command with --resume continues (serial runs only)")
    p.set_defaults(run=cmd_compare)

    p = sub.add_parser("merge", help="merge the output directories of compare shards", description="Merge compare shard directories into one set of tables and plots (identical to an unsharded run).")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="shard output directories, or folders holding shard-i-of-N ones")
    p.add_argument("--out", help="merged output directory (default: DIRS' common parent / merged)")
    p.add_argument("--overwrite", action="store_true", help="replace the structattn outputs already in --out")
    p.add_argument("--no-plots", action="store_true", help="skip the plots")
    p.add_argument("--partial", action="store_true", help="merge the runs present when some runs of the comparison are in no directory yet (the tables say which part they cover)")
    add_shared_flags(p)
    p.set_defaults(run=cmd_merge)

    p = sub.add_parser("keep", help="keep a finished compare folder as evidence (records, tables, logs; no checkpoints, no corpus text)", description="Copy the small files of a finished compare folder (or shard folder) into DEST, e.g. results/NAME/, to commit: manifest, config, provenance, tables, each run's record (checked, references of corpora that may not be redistributed left out: they are read again from the corpus) and training log. Checkpoints and plots stay behind.")
    p.add_argument("src", help="a finished compare output directory (or one of its shard-i-of-N folders)")
    p.add_argument("dest", help="the folder to write, e.g. results/NAME")
    p.add_argument("--overwrite", action="store_true", help="replace the files DEST already holds")
    p.add_argument("--partial", action="store_true", help="keep the finished runs of a folder whose other runs still train")
    add_shared_flags(p)
    p.set_defaults(run=cmd_keep)

    p = sub.add_parser("eval", help="evaluate a checkpoint", description="Rebuild the model stored in a checkpoint (best.pt or last.pt) and print its loss and accuracy on a split as JSON (translation runs: also BLEU and chrF, beam search as the run decoded).")
    p.add_argument("checkpoint", help="a checkpoint file written by train or compare")
    p.add_argument("--split", default="test", help="train, dev or test (default: test)")
    add_shared_flags(p)
    p.set_defaults(run=cmd_eval)

    for name, (_, text) in PASS_THROUGH.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def _record_command(argv: list[str]) -> None:
    if "-h" in argv or "--help" in argv:
        return  # help records nothing, and importing structattn.experiments (torch) would cost ~3 s
    from structattn.experiments.provenance import set_command_line

    set_command_line(argv)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    text = text.split(" In call to configurable ")[0]  # gin's suffix names a function object
    if isinstance(err, KeyError):
        text = f"missing key {text}"
    return text


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    show_traceback = "--traceback" in argv[:1] or os.environ.get("STRUCTATTN_TRACEBACK") == "1"
    if argv[:1] == ["--traceback"]:
        argv = argv[1:]
    command = argv[0] if argv else None
    quiet_before = os.environ.get(QUIET_ENV)  # --quiet sets it for this command only
    try:
        _record_command(["structattn", *argv])
        argv, imports = take_imports(argv)
        command = argv[0] if argv else None
        load_plugins(imports)
        if command in PASS_THROUGH:
            if "--quiet" in argv[1:]:
                os.environ[QUIET_ENV] = "1"  # bars made where --quiet does not reach (restored below)
            return _pass_through(command, argv[1:])
        args = build_parser().parse_args(argv)
        if getattr(args, "quiet", False):
            os.environ[QUIET_ENV] = "1"
        apply_shared_flags(args)
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except KeyboardInterrupt:
        print("structattn: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # one clear line, no traceback (unless asked for)
        if show_traceback:
            raise
        prefix = f"structattn {command}" if command else "structattn"
        print(f"{prefix}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    finally:
        if quiet_before is None:
            os.environ.pop(QUIET_ENV, None)
        else:
            os.environ[QUIET_ENV] = quiet_before


if __name__ == "__main__":
    sys.exit(main())
