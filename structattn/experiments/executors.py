"""Executors: where the runs of a comparison execute. The compare folder stays the truth either way.

* :class:`SerialExecutor` (the default): one run after another in this process (or in every process of a
  ``torchrun`` group, data parallel), the prepared data shared between runs, failing at the first error.
* :class:`DaskExecutor` (``structattn compare --dask ADDRESS`` or ``--dask local:N``): every run is one Dask
  task. ``ADDRESS`` is a running scheduler (``tcp://host:8786``); ``local:N`` starts a
  ``dask.distributed.LocalCluster`` of ``N`` single-threaded worker processes. Workers prepare each task's
  data once per process (cached for the later runs of the same comparison), run with the client's torch
  thread count (so the numbers equal a serial run's at that setting) and write checkpoints into the compare
  folder, which they must see at the same path (a shared mount: checked before any run). The client writes
  the records. A worker that dies mid-run (killed, out of memory) loses nothing: the scheduler gives its run
  to another worker, which continues from the run's ``last.pt``. A run that raises is reported with its run
  id after the other runs finish.

Both yield one :class:`Outcome` per run, in the order runs finish; :func:`make_executor` picks one from the
``--dask`` option. Example::

    with make_executor("local:2") as executor:
        run_comparison(comparison, "runs/x", executor=executor)
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch

from structattn.experiments.spec import RunSpec
from structattn.progress import progress_bar
from structattn.training.distributed import Distributed

#: how long a client waits for a scheduler to answer, and for a first worker to join it (seconds)
CONNECT_TIMEOUT_S = 5.0
WORKERS_TIMEOUT_S = 120.0
#: glibc's MALLOC_TRIM_THRESHOLD_ for the workers of a ``local:N`` cluster. Dask's nannies set 64 KiB (to hand
#: freed memory back to the OS) and then every large tensor freed and allocated again in a training step costs
#: page faults: a run of benchmarks/dask_compare.py took 8-9% longer on a worker than in the client's process,
#: 2-3% with this (1 GiB: trim only beyond that). A value already in the environment still wins.
LOCAL_MALLOC_TRIM_THRESHOLD = 1 << 30


@dataclass(frozen=True)
class RunJob:
    """One run of a comparison, as shipped to whoever executes it (picklable).

    Args:
        comparison: the :class:`~structattn.experiments.compare.Comparison` the run belongs to.
        spec: the run.
        out: the compare folder (``runs/<run_id>/`` holds the run's checkpoints).
        config: the operative gin config, stored with the checkpoints.
        fingerprint: the comparison's fingerprint, written into the record.
        data_sha256: per task label, the data checksum of the runs kept on ``--resume``: the run refuses other
            data (a new corpus version would mix with them).
    """

    comparison: Any
    spec: RunSpec
    out: str
    config: str
    fingerprint: str
    data_sha256: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    """A finished run: its record, or the error it raised (``record`` is then ``None``)."""

    spec: RunSpec
    record: dict[str, Any] | None = None
    error: BaseException | None = None


#: ``work(job, context=..., quiet=..., cache=...) -> record``: runs one job (see ``compare.run_job``)
Work = Callable[..., dict[str, Any]]


class Executor:
    """Runs jobs and yields their outcomes; a context manager that holds what it started (a cluster)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Release what the executor started (nothing for the serial one)."""

    def check_folder(self, out: Path) -> None:
        """Fail before any run when whoever executes the runs cannot write into ``out``."""

    def run(self, jobs: Sequence[RunJob], work: Work, total: int) -> Iterator[Outcome]:
        """Execute every job; yield one outcome each as it finishes (``total``: runs in the comparison)."""
        raise NotImplementedError


class SerialExecutor(Executor):
    """One run after another in this process (every rank of a torchrun group runs each run together).

    Args:
        context: this process's place in a torchrun group (``Distributed()`` alone).
        quiet: no per-run lines and progress bars.
    """

    def __init__(self, context: Distributed = Distributed(), quiet: bool = False) -> None:
        self.context, self.quiet = context, quiet

    def run(self, jobs: Sequence[RunJob], work: Work, total: int) -> Iterator[Outcome]:
        cache: dict[Any, Any] = {}  # prepared data, shared by the runs of a task
        for job in jobs:
            spec = job.spec
            if not self.quiet and self.context.is_main:
                print(f"[{spec.index + 1}/{total}] {spec.task_label} | {spec.setting} | seed {spec.seed}", flush=True)
            yield Outcome(spec, work(job, context=self.context, quiet=self.quiet, cache=cache))


def import_distributed() -> Any:
    """``dask.distributed``, or an ImportError that says how to install it."""
    try:
        import dask.distributed as distributed
    except ImportError as error:
        raise ImportError("structattn compare --dask needs dask: `pip install 'structattn[dask]'`") from error
    return distributed


def parse_address(address: str) -> int | str:
    """``"local:N"`` -> ``N`` (workers of a local cluster), a scheduler address -> itself.

    Raises:
        ValueError: ``local:`` without a positive count, or an empty address.
    """
    address = str(address).strip()
    if address.startswith("local:"):
        count = address.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--dask {address!r}: local:N needs a number of workers N >= 1 (e.g. local:2)")
        return int(count)
    if not address:
        raise ValueError("--dask needs a scheduler address (tcp://host:8786) or local:N")
    return address


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker sets before a run so that it runs as this process would (picklable)."""

    threads: int
    command: tuple[str, ...]
    plugins: tuple[dict[str, Any], ...]


class DaskExecutor(Executor):
    """Every run one Dask task on the workers of a scheduler (see the module docstring).

    Args:
        address: a scheduler address (``tcp://host:8786``) or ``local:N``.
        quiet: no progress bar of finished runs.
        connect_timeout: seconds to wait for the scheduler to answer.

    Raises:
        ConnectionError: the scheduler does not answer within ``connect_timeout`` seconds (naming the
            address), or has no worker after :data:`WORKERS_TIMEOUT_S`.
    """

    def __init__(self, address: str, quiet: bool = False, connect_timeout: float = CONNECT_TIMEOUT_S) -> None:
        distributed = import_distributed()
        self.address, self.quiet, self.cluster = address, quiet, None
        target = parse_address(address)
        if isinstance(target, int):
            import dask

            trim = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": LOCAL_MALLOC_TRIM_THRESHOLD}
            try:
                with dask.config.set(trim):
                    self.cluster = distributed.LocalCluster(n_workers=target, threads_per_worker=1, processes=True,
                                                            dashboard_address=None, silence_logs=logging.CRITICAL)
            except RuntimeError as err:  # the spawned workers re-import an unguarded __main__ and fail
                raise RuntimeError(f"--dask {address!r}: the local Dask cluster did not start ({err}); a Python "
                                   "script that starts one must keep its work under `if __name__ == '__main__':` "
                                   "(the worker processes import the script)") from err
            self.client = distributed.Client(self.cluster)
            return
        try:
            self.client = distributed.Client(target, timeout=f"{connect_timeout}s")
        except (OSError, TimeoutError) as err:
            raise ConnectionError(f"cannot reach the Dask scheduler at {address!r} within {connect_timeout:g} s "
                                  f"({' '.join(str(err).split())}); is `dask scheduler` running there?") from None
        try:
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
        except TimeoutError:
            self.close()
            raise ConnectionError(f"the Dask scheduler at {address!r} has no worker after {WORKERS_TIMEOUT_S:g} s; "
                                  f"start some with `dask worker {address}`") from None

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def check_folder(self, out: Path) -> None:
        """Every worker reads a probe file this process writes into ``out``.

        Raises:
            ValueError: the workers (named, with their hosts) that cannot read it.
        """
        token = uuid.uuid4().hex
        probe = Path(out).resolve() / f".structattn-probe-{token}"
        probe.write_text(token)
        try:
            seen = self.client.run(sees_probe, str(probe), token)
        finally:
            probe.unlink()
        blind = {worker: host for worker, (host, ok) in seen.items() if not ok}
        if blind:
            names = ", ".join(f"{w} (host {h})" for w, h in sorted(blind.items()))
            raise ValueError(f"Dask workers {names} cannot see the compare folder {str(Path(out).resolve())!r}: they "
                             "write each run's checkpoints there, so every worker must see that folder at the same "
                             "path (a shared mount such as NFS; see docs/cluster.md)")

    def run(self, jobs: Sequence[RunJob], work: Work, total: int) -> Iterator[Outcome]:
        distributed = import_distributed()
        settings = WorkerSettings(torch.get_num_threads(), _command(), tuple(_plugins()))
        futures = {}
        for job in jobs:
            job = replace(job, out=str(Path(job.out).resolve()))
            key = f"{job.spec.run_id}-{uuid.uuid4().hex[:8]}"
            futures[key] = (job.spec, self.client.submit(run_on_worker, work, job, settings, key=key, pure=False))
        bar = progress_bar(total=len(jobs), quiet=self.quiet, desc="runs", unit="run")
        try:
            for future in distributed.as_completed([f for _, f in futures.values()]):
                spec = futures[future.key][0]
                bar.update(1)
                if future.status == "finished":
                    yield Outcome(spec, future.result())
                else:
                    yield Outcome(spec, error=_error_of(future))
        except BaseException:
            self.client.cancel([f for _, f in futures.values()])
            raise
        finally:
            bar.close()


def _error_of(future: Any) -> BaseException:
    try:
        return future.exception()
    except BaseException as err:  # a cancelled future raises instead of returning its error
        return err


def _command() -> tuple[str, ...]:
    from structattn.experiments.provenance import command_line

    return tuple(shlex.split(command_line()))


def _plugins() -> list[dict[str, Any]]:
    from structattn import plugins

    return plugins.loaded()


def sees_probe(path: str, token: str) -> tuple[str, bool]:
    """Run on every worker: its host, and whether it reads ``token`` from ``path``."""
    try:
        return socket.gethostname(), Path(path).read_text() == token
    except OSError:
        return socket.gethostname(), False


#: per worker process: the fingerprint of the comparison whose data it holds, and that data
_WORKER_CACHE: dict[str, dict[Any, Any]] = {}
_REPLAYED: set[str] = set()


def run_on_worker(work: Work, job: RunJob, settings: WorkerSettings) -> dict[str, Any]:
    """Run on a worker: set torch's threads, the recorded command and plugins as the client has them, check
    that the compare folder is visible, then run the job quietly with this process's prepared data."""
    from structattn import plugins
    from structattn.experiments.provenance import set_command_line
    from structattn.training import distributed

    torch.set_num_threads(settings.threads)
    set_command_line(settings.command)
    for record in settings.plugins:
        if record["module"] not in _REPLAYED:
            plugins.replay([record], recorded_by="the Dask client")
            _REPLAYED.add(record["module"])
    if not (Path(job.out) / "comparison.json").is_file():
        raise FileNotFoundError(f"the Dask worker on host {socket.gethostname()} (pid {os.getpid()}) cannot see the "
                                f"compare folder {job.out!r}; every worker must see it at the same path (a shared "
                                "mount; see docs/cluster.md)")
    if job.fingerprint not in _WORKER_CACHE:
        _WORKER_CACHE.clear()  # one comparison's data at a time
        _WORKER_CACHE[job.fingerprint] = {}
    return work(job, context=distributed.setup(), quiet=True, cache=_WORKER_CACHE[job.fingerprint])


def make_executor(dask: str | None, context: Distributed = Distributed(), quiet: bool = False) -> Executor:
    """The executor the ``--dask`` option asks for: :class:`SerialExecutor` when ``None`` or empty.

    Raises:
        ValueError: ``--dask`` under torchrun (one big data-parallel run is torchrun's job, many small runs
            Dask's), or a malformed address.
    """
    if not dask:
        return SerialExecutor(context, quiet)
    if context.enabled:
        raise ValueError("--dask runs each run as one Dask task; it cannot run under torchrun (world size "
                         f"{context.world_size}): use torchrun for one big run, --dask for many small ones")
    return DaskExecutor(dask, quiet)


__all__ = ["DaskExecutor", "Executor", "Outcome", "RunJob", "SerialExecutor", "make_executor", "parse_address"]
