"""A comparison: tasks x attention settings x seeds, declared once, validated before any training, run whole
or in shards (``--shard i/N``, see :mod:`structattn.experiments.shards`) on different machines."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from structattn.experiments.executors import Executor, Outcome, RunJob, SerialExecutor
from structattn.experiments.provenance import Stopwatch, environment, now_iso
from structattn.experiments.outputs import COMPARE_OUTPUTS, TRAIN_OUTPUTS, check_output_folder, clear_outputs
from structattn.experiments.record_checks import write_atomic, write_record_file
from structattn.experiments.records import make_manifest, read_manifest, read_records
from structattn.experiments.reuse import Match, Wanted, copy_run_files, find_matches, read_candidates, \
    reuse_folders, reused_record
from structattn.experiments.results import write_tables
from structattn.experiments.run import execute
from structattn.experiments.runners import runner_for
from structattn.experiments.spec import RunSpec, Setup, make_providers, make_task
from structattn.training.deadline import TimeLimitReached, deadline, format_duration, parse_duration, past_deadline
from structattn.training.distributed import Distributed, barrier
from structattn.training.precision import record_precision, resolve_precision


def _labelled(values: Sequence[str] | Mapping[str, str], what: str) -> dict[str, str]:
    if isinstance(values, Mapping):
        out = {str(k): str(v) for k, v in values.items()}
    elif isinstance(values, str):
        raise ValueError(f"compare {what} must be a list or a dict of specs, got the string {values!r}")
    else:
        out = {str(v): str(v) for v in values}
    if not out:
        raise ValueError(f"compare {what}: empty")
    return out


@dataclass(frozen=True)
class Comparison:
    """The declared runs: every task x every setting x every seed, in that order.

    Args:
        tasks: task specs (``"depth_tagging(max_depth=5)"``), a list or a ``{label: spec}`` dict.
        settings: attention plans (``"soft_bias(dependency)"``), a list or a ``{label: plan}`` dict.
        seeds: the seeds of every (task, setting) pair.
        setup: what all runs share (sizes, training, structure and vocabulary options).
        training_by_setting: ``{setting label: {TrainConfig field: value}}``, training options that differ for
            one setting (e.g. each setting at the learning rate its own tuning picked on dev); every other
            option is ``setup.training``'s. Part of the fingerprint when not empty.
    """

    tasks: Mapping[str, str]
    settings: Mapping[str, str]
    seeds: tuple[int, ...]
    setup: Setup = field(compare=False)
    training_by_setting: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def declare(cls, tasks: Sequence[str] | Mapping[str, str], settings: Sequence[str] | Mapping[str, str],
                seeds: Sequence[int], setup: Setup,
                training_by_setting: Mapping[str, Mapping[str, Any]] | None = None) -> "Comparison":
        """Raises ``ValueError`` naming the culprit: repeated seeds, or a ``training_by_setting`` entry for a label
        that is not a setting, or with an option TrainConfig does not have or refuses."""
        seeds = tuple(int(s) for s in seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"compare seeds must be a non-empty list of distinct integers, got {list(seeds)}")
        comparison = cls(_labelled(tasks, "tasks"), _labelled(settings, "settings"), seeds, setup,
                         {k: dict(v) for k, v in (training_by_setting or {}).items()})
        for label in comparison.training_by_setting:
            if label not in comparison.settings:
                raise ValueError(f"compare.training_by_setting: {label!r} is not one of the setting labels "
                                 f"{list(comparison.settings)}")
            comparison.setup_for(label)  # unknown or refused options fail here, before any training
        return comparison

    def setup_for(self, setting: str) -> Setup:
        """The setup of ``setting``'s runs: ``setup`` with its ``training_by_setting`` options applied."""
        options = self.training_by_setting.get(setting)
        if not options:
            return self.setup
        known = {f.name for f in dataclasses.fields(self.setup.training)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"compare.training_by_setting[{setting!r}]: {unknown} are not training options "
                             f"(TrainConfig has {sorted(known)})")
        try:
            training = dataclasses.replace(self.setup.training, **options)
        except (TypeError, ValueError) as err:
            raise ValueError(f"compare.training_by_setting[{setting!r}]: {err}") from None
        return dataclasses.replace(self.setup, training=training)

    def runs(self) -> list[RunSpec]:
        """Every run in order (the index is its place in this list, shared by all shards)."""
        combos = [(t, s, seed) for t in self.tasks for s in self.settings for seed in self.seeds]
        return [RunSpec(k, t, self.tasks[t], s, self.settings[s], seed) for k, (t, s, seed) in enumerate(combos)]

    def validate(self) -> None:
        """Fail before any training on an unknown task, variant, structure or option, or on a variant paired
        with a structure that lacks its fields, or on a task whose ``options()`` (its run ids) leaves out a
        constructor argument: builds every setting's model once (vocabulary of 2)."""
        tasks = {label: make_task(spec) for label, spec in self.tasks.items()}
        for label, task in tasks.items():
            try:
                task.options()
            except ValueError as err:
                raise ValueError(f"task {label!r}: {err}") from None
        for label, plan in self.settings.items():
            try:
                for task in tasks.values():
                    runner = runner_for(task, plan)
                    providers = make_providers(runner.structures(plan, self.setup.model), self.setup.structures)
                    runner.check(task, plan, self.setup, providers)
            except ValueError as err:
                raise ValueError(f"setting {label!r}: {err}") from None

    def dry_run(self, items_per_task: int = 2) -> None:
        """:meth:`validate`, then build every setting's model for every task and run it forward on a batch of
        the task's first train items (no training). Raises ``ValueError`` on any failure."""
        self.validate()
        for task_label, spec in self.tasks.items():
            task = make_task(spec)
            items = task.splits()["train"][:items_per_task]
            for label, plan in self.settings.items():
                try:
                    runner_for(task, plan).dry_run(task, plan, self.setup, items)
                except ValueError as err:
                    raise ValueError(f"setting {label!r} on task {task_label!r}: {err}") from None

    def fingerprint(self) -> str:
        """Hash of everything that defines the runs (shards merge only with equal fingerprints)."""
        fields = {"tasks": self.tasks, "settings": self.settings, "seeds": self.seeds, "setup": self.setup.to_dict()}
        if self.training_by_setting:  # absent when empty: comparisons declared before it keep their fingerprint
            fields["training_by_setting"] = self.training_by_setting
        text = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def run_key(self, spec: RunSpec) -> str:
        """Hash of everything that defines the one run ``spec`` (task spec, plan, seed, and its setting's setup)
        and of nothing else: no labels, no other runs. Another comparison declaring the same run under other
        labels gives it the same key (``compare --reuse``, :mod:`structattn.experiments.reuse`)."""
        fields = {"task": spec.task, "plan": spec.plan, "seed": spec.seed,
                  "setup": self.setup_for(spec.setting).to_dict()}
        text = json.dumps(fields, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_comparison(comparison: Comparison, out_dir: str | Path, *, shard: tuple[int, int] | None = None,
                   config: str = "", quiet: bool = False, context: Distributed = Distributed(),
                   plots: bool = True, mode: str = "refuse", reference: str | None = None,
                   executor: Executor | None = None, time_limit: float | str | None = None,
                   reuse: Sequence[str | Path] = ()) -> "Records":
    """Validate, then train and evaluate the runs of this shard; write records, tables, config and plots.

    ``reference``: the setting label every other setting is tested against in ``significance.csv`` and
    ``results.md`` (default: ``"full"`` when a setting is labelled so, else the first setting); recorded in
    ``comparison.json`` so that ``merge`` uses the same one.

    ``mode`` says what to do when ``out_dir`` already holds compare outputs: ``"refuse"`` (default),
    ``"overwrite"`` them (removed first, listed on stderr), or ``"resume"``: runs whose records match the
    folder's manifest are kept, the others continue from their ``last.pt`` (or start).

    ``executor`` runs the runs (:mod:`structattn.experiments.executors`; default: one after another in this
    process); whatever runs them, this process writes each record once (atomically) as its run finishes, so an
    interrupted folder resumes. A folder is used by one client at a time (``.structattn-compare.lock``).

    ``time_limit`` (seconds, or ``"2h40m"``; serial executor only): after that long, the run in progress
    writes its ``last.pt`` at the step it reached and no further run starts (see
    :mod:`structattn.training.deadline`); one line on stderr says what finished and what is left, the tables
    are not written, and the returned :class:`Records` has the ids of the unfinished runs in ``left``. The same
    command with ``mode="resume"`` (``--resume``) continues where it stopped, in plan order.

    ``reuse`` (``--reuse FOLDER``): compare folders (kept ones, or folders of shard folders) of other
    comparisons; a run of this shard that is not finished in ``out`` and has a record of the same
    :meth:`Comparison.run_key` there is copied in as this comparison's record (relabelled, with
    ``provenance.reused_from``; its training log beside it) instead of being trained; see
    :mod:`structattn.experiments.reuse`. ``provenance.json`` lists the reused runs (``reused_runs``).

    Raises:
        ValueError: a bad declaration, an unusable or used folder (see
            :func:`structattn.experiments.outputs.check_output_folder`), a folder in use by another client,
            or, on resume, a folder holding another comparison or stray records; a ``reuse`` folder that is
            missing or not a compare folder, or a match refused (another precision, other data, two matches
            with different metrics; naming both files).
        RunsFailed: runs raised (executors that carry on past a failure); the others are recorded.
    """
    out = Path(out_dir)
    limit = None if time_limit is None else parse_duration(time_limit)
    if limit is not None and executor is not None and not isinstance(executor, SerialExecutor):
        raise ValueError("a time limit stops runs in this process: it works with the serial executor only, not "
                         f"with {type(executor).__name__} (give its workers a wall-time limit instead, see "
                         "docs/cluster.md)")
    if limit is not None and context.enabled:
        raise ValueError("a time limit is not supported under torchrun (the processes would stop at different "
                         "steps); use the cluster's own wall-time limit")
    comparison.validate()
    runs = comparison.runs()
    mine = [r for r in runs if shard is None or r.index % shard[1] == shard[0]]
    if reference is not None and reference not in comparison.settings:
        raise ValueError(f"compare reference {reference!r} is not one of the settings {list(comparison.settings)}")
    manifest = make_manifest(comparison.fingerprint(), len(runs), shard, mine, reference)
    candidates = read_candidates(reuse_folders(reuse, out)) if reuse else {}  # refused before the folder is used
    if out.exists() and not out.is_dir():
        check_output_folder(out, COMPARE_OUTPUTS, mode)  # names the file: the lock could not be taken in it
    with FolderLock(out) if context.is_main else contextlib.nullcontext():
        used = check_output_folder(out, COMPARE_OUTPUTS, mode)  # inside the lock: a busy folder says so first
        kept = _finished(out, manifest, resolve_precision(comparison.setup.training.precision, context.device)) \
            if used and mode == "resume" else {}
        matches = _matches(comparison, mine, kept, candidates, context.device, out)
        barrier(context)  # every process has seen the folder as it was before the main one writes
        executor = executor or SerialExecutor(context, quiet)
        executor.check_folder(out)  # before anything is written
        watch = Stopwatch()
        if context.is_main:
            if mode == "overwrite":
                clear_outputs(out, used, "structattn compare")
            write_atomic(out / "config.gin", config)
            write_atomic(out / "comparison.json", json.dumps(manifest, indent=1))
            write_provenance(out, watch, {}, finished=False)
        reused = _copy_reused(matches, mine, out, manifest, quiet, context)
        done = {**{index: record for index, (_, record) in kept.items()}, **reused}
        with deadline(limit):
            records, failed, stopped = _run_all(executor, comparison, mine, done, out, config, manifest, quiet,
                                                context, sorted(reused))
        if context.is_main:
            if not failed and stopped is None:
                report(records, out, len(runs), plots, reference)
            write_provenance(out, watch, _checksums(records), finished=not failed and stopped is None,
                             kept=sorted(kept), reused=[r["index"] for r in records if _reused_from(r)])
    finished = {r["index"] for r in records}
    result = Records(records, [] if stopped is None else [s.run_id for s in mine if s.index not in finished])
    if stopped is not None and context.is_main:
        print(_stopped_line(stopped, limit, result, len(mine), out), file=sys.stderr, flush=True)
    if failed:
        lines = "; ".join(f"run {o.spec.run_id} failed: {type(o.error).__name__}: {o.error}"
                          for o in sorted(failed, key=lambda o: o.spec.index))
        raise RunsFailed(f"{lines} ({len(records)} other runs finished and are recorded in {str(out / 'runs')!r}; "
                         "rerun with --resume to retry the failed ones)") from failed[0].error
    return result


class Records(list):
    """The records of a comparison's finished runs (a list, in run order); ``left``: the run ids that did not
    finish because the time limit stopped the comparison (empty when it ran to the end)."""

    def __init__(self, records: Iterable[dict[str, Any]], left: Sequence[str] = ()) -> None:
        super().__init__(records)
        self.left = list(left)


def _stopped_line(stopped: TimeLimitReached, limit: float, result: Records, planned: int, out: Path) -> str:
    where = (f"run {stopped.run_id} stopped at step {stopped.step:,} (continues from {stopped.checkpoint})"
             if stopped.checkpoint else "no run was in progress")
    rest = [r for r in result.left if r != stopped.run_id]
    return (f"structattn compare: time limit {format_duration(limit)} reached; {len(result)} of {planned} runs "
            f"finished in {str(out)!r}, {len(result.left)} left: {where}; {len(rest)} not started"
            + (f" ({', '.join(rest[:3])}{', ...' if len(rest) > 3 else ''})" if rest else "")
            + "; run the same command with --resume (and a --time-limit) to continue")


class RunsFailed(RuntimeError):
    """Runs of a comparison raised; the message names each by its run id with its error."""


def _run_all(executor: Executor, comparison: Comparison, mine: Sequence[RunSpec], done: Mapping[int, dict[str, Any]],
             out: Path, config: str, manifest: Mapping[str, Any], quiet: bool, context: Distributed,
             reused: Sequence[int] = ()) -> tuple[list[dict[str, Any]], list[Outcome], TimeLimitReached | None]:
    """Keep the ``done`` records (those of ``reused`` were just copied in, and said so), run the others on
    ``executor``, write each record as it arrives; the records in run order, the outcomes of the runs that
    failed, and the stop at the time limit (or ``None``)."""
    finished, failed, stopped = dict(done), [], None
    for spec in mine:
        if spec.index in done and spec.index not in reused and not quiet and context.is_main:
            print(f"[{spec.index + 1}/{manifest['runs']}] {spec.run_id}: finished, kept", flush=True)
    kept_data = _checksums(done.values())
    jobs = [RunJob(comparison, spec, str(out), config, manifest["fingerprint"], kept_data) for spec in mine
            if spec.index not in done]
    try:
        for outcome in executor.run(jobs, run_job, manifest["runs"]):
            if outcome.error is not None:
                failed.append(outcome)
            elif outcome.spec.index not in finished:  # a run is recorded once, whatever the executor reports
                record = write_record(out, outcome.record) if context.is_main else outcome.record
                finished[outcome.spec.index] = record
    except TimeLimitReached as reached:
        stopped = reached
    return [finished[k] for k in sorted(finished)], failed, stopped


def run_job(job: RunJob, *, context: Distributed = Distributed(), quiet: bool = False,
            cache: dict[tuple[str, str], Any] | None = None) -> dict[str, Any]:
    """Train and evaluate one run of a comparison (wherever an executor runs it); its record.

    The run continues from ``runs/<run_id>/checkpoints/last.pt`` when that exists: the folder was checked
    empty (or cleared) before any run, so a ``last.pt`` is this run's own, left by ``--resume``'s earlier
    command or by an attempt on a worker that died. ``cache``: prepared data shared with other runs."""
    spec, out = job.spec, Path(job.out)
    if past_deadline():  # no run starts after the time limit
        raise TimeLimitReached(0, None)
    data = _data_for(spec, job.comparison, {} if cache is None else cache, quiet)
    kept = job.data_sha256.get(spec.task_label)
    if kept is not None and kept != data.checksum:
        raise ValueError(f"--resume: the data of task {spec.task_label!r} changed since the runs kept in {job.out!r} "
                         f"(or reused into it with --reuse) were trained (sha256 {kept[:16]} then, "
                         f"{data.checksum[:16]} now: another version of the corpus or another path to it); run on the "
                         "same data, or start a fresh --out")
    last = out / "runs" / spec.run_id / "checkpoints" / "last.pt"
    try:
        record = execute(spec, job.comparison.setup_for(spec.setting), data, out_dir=out / "runs" / spec.run_id,
                         context=context, quiet=quiet, config=job.config, resume=last if last.is_file() else None)
    except TimeLimitReached as reached:  # the stop line names the run, whichever runner's loop stopped it
        reached.run_id = reached.run_id or spec.run_id
        raise
    record["fingerprint"] = job.fingerprint
    record["run_key"] = job.comparison.run_key(spec)
    return record


def write_record(out: Path, record: Mapping[str, Any]) -> dict[str, Any]:
    """``out/runs/<run_id>.json``, stamped with its checksum and written atomically (a reader, or a kill during
    the write, sees the whole record or none: :func:`structattn.experiments.record_checks.write_record_file`);
    the record as written."""
    return write_record_file(out / "runs" / f"{record['run_id']}.json", record)


def _checksums(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each task's data checksum, as its runs recorded it."""
    return {r["task_label"]: r["provenance"]["data"]["sha256"] for r in records
            if "sha256" in r.get("provenance", {}).get("data", {})}


class FolderLock:
    """``out/.structattn-compare.lock`` while a client writes into ``out``: a second client is refused, naming
    the first (host, pid, start). A lock left by a process that is gone (same host) is taken over.

    Raises:
        ValueError: the folder is in use (on entering).
    """

    NAME = ".structattn-compare.lock"

    def __init__(self, out: Path) -> None:
        self.path = Path(out) / self.NAME

    def __enter__(self) -> "FolderLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": now_iso()})
        for _ in range(2):
            try:
                with open(self.path, "x") as handle:
                    handle.write(mine)
                return self
            except FileExistsError:
                holder = self._holder()
                if not self._gone(holder):
                    raise ValueError(
                        f"{str(self.path.parent)!r} is in use by another structattn compare (host "
                        f"{holder.get('host')}, pid {holder.get('pid')}, since {holder.get('since')}); wait for it to "
                        f"finish, or remove {str(self.path)!r} if that process is gone") from None
                print(f"structattn compare: taking over {str(self.path)!r}: its holder (pid {holder.get('pid')}, since "
                      f"{holder.get('since')}) is no longer running", file=sys.stderr)
                self.path.unlink(missing_ok=True)  # its process is gone: take the folder over
        raise ValueError(f"cannot take the lock {str(self.path)!r}: another client keeps taking it")

    def __exit__(self, *exc: Any) -> None:
        self.path.unlink(missing_ok=True)

    def _holder(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    @staticmethod
    def _gone(holder: Mapping[str, Any]) -> bool:
        """Whether the holder is a process of this host that no longer runs."""
        if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
            return False
        try:
            os.kill(holder["pid"], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def write_provenance(out: Path, watch: Stopwatch, data: Mapping[str, str], *, finished: bool,
                     kept: Sequence[int] = (), reused: Sequence[int] = ()) -> None:
    """``out/provenance.json``: the environment (versions, commit, CPU, command, plugins), start and wall
    time, each task's data checksum, on resume the runs kept from before (their records hold their own), and
    the runs copied from other comparisons (``--reuse``, now or by an earlier command; their records say from
    where, ``provenance.reused_from``)."""
    text = {**environment(), **watch.fields(), "finished": finished, "data_sha256": dict(data),
            "kept_runs": list(kept), "reused_runs": list(reused)}
    write_atomic(out / "provenance.json", json.dumps(text, indent=1))


def _finished(out: Path, manifest: dict[str, Any], precision: str) -> dict[int, tuple[Path, dict[str, Any]]]:
    """On resume: the records already in ``out`` (checked against the new manifest, and trained in
    ``precision``, what the config's ``training.precision`` means here) with their files, by run index."""
    if (out / "comparison.json").is_file():
        old = read_manifest(out)
        if old.get("fingerprint") != manifest["fingerprint"]:
            raise ValueError(f"--resume: {str(out)!r} holds another comparison (fingerprint {old.get('fingerprint')}, "
                             f"the config now gives {manifest['fingerprint']}); use --overwrite or another --out")
        if old.get("shard") != manifest["shard"]:
            raise ValueError(f"--resume: {str(out)!r} holds shard {old.get('shard')}, not {manifest['shard']}")
    kept = read_records(out, manifest)
    for path, record in kept.values():
        if record_precision(record) != precision:
            raise ValueError(f"--resume: {str(path)!r} trained in {record_precision(record)}, but this comparison's "
                             f"training.precision means {precision} here ('auto' resolves per machine); resume on a "
                             f"machine where it means {record_precision(record)}, or bind that precision")
    return kept


def _matches(comparison: Comparison, mine: Sequence[RunSpec], kept: Mapping[int, tuple[Path, dict[str, Any]]],
             candidates: Mapping[str, Sequence[Match]], device: Any, out: Path) -> dict[int, Match]:
    """``--reuse``: the match of each run of ``mine`` not ``kept`` that has one among ``candidates`` (checked:
    :func:`structattn.experiments.reuse.find_matches`), by run index."""
    if not candidates:
        return {}
    wanted = [Wanted(spec, comparison.run_key(spec),
                     resolve_precision(comparison.setup_for(spec.setting).training.precision, device))
              for spec in mine if spec.index not in kept]
    return find_matches(candidates, wanted, kept, out)


def _copy_reused(matches: Mapping[int, Match], mine: Sequence[RunSpec], out: Path, manifest: Mapping[str, Any],
                 quiet: bool, context: Distributed) -> dict[int, dict[str, Any]]:
    """Write each match into ``out`` as this comparison's record (and copy its log), saying so; the records
    (references read again from the corpus kept in memory, as for kept runs), by run index."""
    reused = {}
    for spec in mine:
        if spec.index not in matches:
            continue
        match = matches[spec.index]
        record = reused_record(match, spec, manifest["fingerprint"])
        if context.is_main:
            record = {**record, "checksum": write_record(out, record)["checksum"]}
            copy_run_files(match, out / "runs" / spec.run_id)
            if not quiet:
                print(f"[{spec.index + 1}/{manifest['runs']}] {spec.run_id}: reused from {match.path}", flush=True)
        reused[spec.index] = record
    return reused


def _reused_from(record: Mapping[str, Any]) -> bool:
    return "reused_from" in (record.get("provenance") or {})


def train_one(comparison: Comparison, out_dir: str | Path, *, config: str = "", quiet: bool = False,
              context: Distributed = Distributed(), mode: str = "refuse") -> dict[str, Any]:
    """The single run of a one-run comparison (``structattn train``): checkpoints, ``record.json``,
    ``config.gin`` and the results tables under ``out_dir``. ``mode``: as for :func:`run_comparison`;
    ``"resume"`` continues from ``out_dir/checkpoints/last.pt`` when it exists."""
    comparison.validate()
    spec, out = comparison.runs()[0], Path(out_dir)
    used = check_output_folder(out, TRAIN_OUTPUTS, mode)
    barrier(context)
    if context.is_main and mode == "overwrite":
        clear_outputs(out, used, "structattn train")
    last = out / "checkpoints" / "last.pt"
    data = _data_for(spec, comparison, {}, quiet or not context.is_main)
    record = execute(spec, comparison.setup_for(spec.setting), data, out_dir=out, context=context, quiet=quiet, config=config,
                     resume=last if mode == "resume" and last.is_file() else None)
    if context.is_main:
        out.mkdir(parents=True, exist_ok=True)
        record = write_record_file(out / "record.json", record)
        (out / "config.gin").write_text(config)
        report([record], out, 1, plots=False)
    return record


def _data_for(spec: RunSpec, comparison: Comparison, cache: dict[tuple[str, str], Any], quiet: bool) -> Any:
    """Encode each task once per kind of data (runners with one ``data_kind`` share it), with every structure
    any setting of that kind reads (precomputed once per dataset)."""
    task = make_task(spec.task)
    runner = runner_for(task, spec.plan)
    key = (spec.task_label, runner.data_key())
    if key not in cache:
        sharing = [(p, runner_for(task, p)) for p in comparison.settings.values()]
        names = set().union(*(r.structures(p, comparison.setup.model) for p, r in sharing
                              if r.data_key() == runner.data_key()))
        providers = make_providers(names, comparison.setup.structures)
        cache[key] = runner.prepare(task, providers, comparison.setup.vocab, quiet=quiet,
                                    cache_dir=comparison.setup.cache_dir)
    return cache[key]


def report(records: Sequence[dict[str, Any]], out: Path, total: int, plots: bool = True,
           reference: str | None = None) -> None:
    """Tables (``results.csv``, ``significance.csv``, ``results.md``; every setting tested against ``reference``,
    see :func:`structattn.experiments.results.write_tables`) and plots of ``records``; a note says when they
    cover only part of the ``total`` runs."""
    note = "" if len(records) == total else f"Partial: {len(records)} of {total} runs (merge the shards)."
    write_tables(records, out, note, reference=reference)
    if plots and records:
        from structattn.experiments.plots import write_plots

        write_plots(records, out / "plots")


__all__ = ["Comparison", "FolderLock", "RunsFailed", "report", "run_comparison", "run_job", "train_one", "write_record"]
