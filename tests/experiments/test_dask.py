"""Comparisons on a Dask cluster: a real scheduler and worker processes on localhost (no mocks).

Equal tables to a serial run (one thread), a worker SIGKILLed mid-run (the sweep finishes, each run recorded
once), an unreachable scheduler (a clear error naming it, in seconds), a run that raises (its run id reaches
the user, the other runs are recorded), workers that cannot see the folder (refused before any run), and
two clients on one folder (refused)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from structattn import cli, plugins
from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, run_comparison
from structattn.experiments.compare import FolderLock, RunsFailed
from structattn.experiments.executors import DaskExecutor, make_executor, parse_address
from structattn.tasks.base import TASKS, task_names
from structattn.training import TrainConfig

pytest.importorskip("dask.distributed", reason="the [dask] extra is not installed")

TASK = "depth_tagging(limit=30, max_depth=3)"
MODEL = EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=32, dropout=0.1)
SETUP = Setup(MODEL, TrainConfig(lr=3e-3, warmup_steps=2, max_steps=6, batch_size=8, eval_every=3, patience=0))
BROKEN = '''
"""A test plugin: depth tagging whose data cannot be read (fails on the worker, after validation)."""
from structattn.tasks.base import register_task
from structattn.tasks.depth_tagging import DepthTagging


@register_task("broken_depth")
class BrokenDepth(DepthTagging):
    def splits(self):
        raise RuntimeError("broken on purpose")
'''


def comparison(settings=None, seeds=(0, 1), setup=SETUP, tasks=None):
    settings = settings or {"full": "full", "soft": "soft_bias(dependency)"}
    return Comparison.declare(tasks or {"depth": TASK}, settings, list(seeds), setup)


def records_in(out):
    return sorted(p.name for p in (out / "runs").glob("*.json"))


@pytest.fixture(scope="module")
def executor():
    """One local cluster of two single-threaded worker processes for the module (starting one costs seconds)."""
    with make_executor("local:2", quiet=True) as ex:
        yield ex


def test_equal_tables_to_a_serial_run(executor, tmp_path):
    serial = run_comparison(comparison(seeds=(0,)), tmp_path / "serial", quiet=True, plots=False)
    on_dask = run_comparison(comparison(seeds=(0,)), tmp_path / "dask", quiet=True, plots=False, executor=executor)
    for name in ("results.csv", "significance.csv", "results.md"):
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes(), name
    assert [r["run_id"] for r in on_dask] == [r["run_id"] for r in serial]
    assert [r["metrics"] for r in on_dask] == [r["metrics"] for r in serial]
    assert records_in(tmp_path / "dask") == [f"{r['run_id']}.json" for r in serial]
    assert {r["provenance"]["torch_threads"] for r in on_dask} == {1}
    assert all((tmp_path / "dask" / "runs" / r["run_id"] / "checkpoints" / "best.pt").is_file() for r in on_dask)
    leftovers = [p.name for p in (tmp_path / "dask").rglob(".*")]
    assert leftovers == []  # no lock, probe or temporary record left behind
    provenance = json.loads((tmp_path / "dask" / "provenance.json").read_text())
    assert provenance["finished"] and provenance["data_sha256"] == {"depth": serial[0]["provenance"]["data"]["sha256"]}


def test_a_worker_killed_mid_run_loses_nothing(executor, tmp_path):
    """SIGKILL the worker running a run once it has written a last.pt: the scheduler gives the run to another
    worker, which continues from that checkpoint; every run is recorded once."""
    setup = Setup(MODEL, TrainConfig(lr=3e-3, warmup_steps=2, max_steps=60, batch_size=8, eval_every=3, patience=0))
    out, result, client = tmp_path / "killed", {}, executor.client
    sweep = threading.Thread(target=lambda: result.update(records=run_comparison(
        comparison({"full": "full"}, seeds=(0, 1), setup=setup), out, quiet=True, plots=False, executor=executor)))
    sweep.start()
    deadline, victim = time.monotonic() + 90, None
    while victim is None and time.monotonic() < deadline and sweep.is_alive():
        started = {p.parts[-3] for p in out.glob("runs/*/checkpoints/last.pt")}
        for worker, keys in client.processing().items():
            if any(str(key).rsplit("-", 1)[0] in started for key in keys):
                victim = worker
        time.sleep(0.02)
    assert victim is not None, "no run was seen mid-way with a last.pt (the runs finished too fast to kill one)"
    os.kill(client.run(os.getpid)[victim], signal.SIGKILL)
    sweep.join(timeout=180)
    assert not sweep.is_alive() and "records" in result
    records = result["records"]
    assert [r["index"] for r in records] == [0, 1] and records_in(out) == [f"{r['run_id']}.json" for r in records]
    assert all(r["history"][-1]["step"] == 60 for r in records)
    assert (out / "results.csv").is_file() and not (out / FolderLock.NAME).exists()
    for r in records:  # the resumed run's log continues without repeating a step
        steps = [json.loads(line)["step"] for line in (out / "runs" / r["run_id"] / "log.jsonl").read_text().splitlines()]
        assert steps == sorted(set(steps)) and steps[-1] == 60, (r["run_id"], steps)


def test_an_unreachable_scheduler_is_named_within_seconds(tmp_path, capsys):
    start = time.monotonic()
    with pytest.raises(ConnectionError, match=r"cannot reach the Dask scheduler at 'tcp://127\.0\.0\.1:9' within 2 s"):
        DaskExecutor("tcp://127.0.0.1:9", connect_timeout=2)
    assert time.monotonic() - start < 10
    argv = ["compare", "configs/quickstart.gin", "--out", str(tmp_path / "x"), "--quiet", "--dask", "tcp://127.0.0.1:9"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("structattn compare: error: cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'")
    assert not (tmp_path / "x" / "runs").exists()
    with pytest.raises(ValueError, match="local:N needs a number of workers"):
        parse_address("local:0")
    from structattn import api  # the Python API's dask= is the command's --dask

    with pytest.raises(ConnectionError, match=r"cannot reach the Dask scheduler at 'tcp://127\.0\.0\.1:9'"):
        api.compare("configs/quickstart.gin", tmp_path / "y", quiet=True, dask="tcp://127.0.0.1:9")
    with pytest.raises(ValueError, match="dask must be a scheduler address or 'local:N', got 2"):
        api.compare("configs/quickstart.gin", tmp_path / "y", quiet=True, dask=2)
    assert not (tmp_path / "y" / "runs").exists()


def test_a_run_that_raises_is_named_and_the_others_are_recorded(executor, tmp_path, monkeypatch):
    task_names()  # built-ins register on first lookup: before the copy
    monkeypatch.setattr(TASKS, "_entries", dict(TASKS._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    (tmp_path / "broken_plugin.py").write_text(BROKEN)
    plugins.load_plugins([str(tmp_path / "broken_plugin.py")])  # the workers replay it from its file
    tasks = {"depth": TASK, "broken": "broken_depth(limit=30, max_depth=3)"}
    out = tmp_path / "out"
    with pytest.raises(RunsFailed, match=r"run 001_broken_full_s0 failed: RuntimeError: broken on purpose \(1 other"):
        run_comparison(comparison({"full": "full"}, seeds=(0,), tasks=tasks), out, quiet=True, plots=False,
                       executor=executor)
    assert records_in(out) == ["000_depth_full_s0.json"]
    assert not json.loads((out / "provenance.json").read_text())["finished"] and not (out / FolderLock.NAME).exists()
    sys.modules.pop("broken_plugin", None)


def test_two_clients_on_one_folder(tmp_path):
    out = tmp_path / "out"
    with FolderLock(out):
        with pytest.raises(ValueError, match=rf"is in use by another structattn compare \(host .*, pid {os.getpid()}"):
            run_comparison(comparison(), out, quiet=True, plots=False)
    (out / FolderLock.NAME).write_text(json.dumps({"host": os.uname().nodename, "pid": 2**22 + 7, "since": "then"}))
    with FolderLock(out):  # a lock whose process is gone is taken over
        assert json.loads((out / FolderLock.NAME).read_text())["pid"] == os.getpid()
    assert not (out / FolderLock.NAME).exists()


@pytest.mark.slow  # starts a worker process of its own (~5 s idle, ~20 s on a busy machine)
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("dask") is None,
                    reason="needs `unshare` (util-linux) and the `dask` command to start a worker in its own mounts")
def test_workers_that_cannot_see_the_folder_are_refused(executor, tmp_path):
    """A worker in its own mount namespace, with an empty tmpfs over the compare folder's parent, joins the
    scheduler: the probe fails before any run, naming that worker."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    address = executor.client.scheduler.address
    command = f"mount -t tmpfs none {hidden} && exec {shutil.which('dask')} worker {address} --nthreads 1 --name blind"
    worker = subprocess.Popen(["unshare", "--mount", "sh", "-c", command], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(executor.client.scheduler_info()["workers"]) < 3:
            if worker.poll() is not None:
                pytest.skip(f"could not start a worker in its own mounts: {worker.stderr.read().decode()[-300:]}")
            assert time.monotonic() < deadline, "the blind worker did not join"
            time.sleep(0.1)
        with pytest.raises(ValueError, match=r"Dask workers tcp://\S+ \(host .*\) cannot see the compare folder .*shared mount"):
            run_comparison(comparison(), hidden / "out", quiet=True, plots=False, executor=executor)
        assert list((hidden / "out").iterdir()) == []  # refused before anything was written
    finally:
        executor.client.retire_workers(names=["blind"])
        worker.terminate()
        worker.wait(timeout=30)


@pytest.mark.slow  # two commands that each start a local cluster (~10 s idle, ~40 s on a busy machine)
def test_the_command_with_dask_local(tmp_path, capsys, monkeypatch):
    """``structattn compare --dask local:2``: the serial command's tables; a progress bar of finished runs
    unless --quiet; a raising run (a plugin task) named on stderr with its run id, exit status 1."""
    task_names()
    monkeypatch.setattr(TASKS, "_entries", dict(TASKS._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    tiny = ["--threads", "1", "--no-plots", "--gin-param", "compare.seeds = [0, 1]",
            "--gin-param", "compare.tasks = {'depth': 'depth_tagging(limit=30)'}",
            "--gin-param", "compare.settings = ['full', 'hard_mask(dependency)']",
            *[a for b in ("model.d_model = 8", "model.ffn_dim = 8", "model.num_heads = 2", "model.num_layers = 1",
                          "training.max_steps = 4", "training.eval_every = 2") for a in ("--gin-param", b)]]
    assert cli.main(["compare", "configs/quickstart.gin", "--out", str(tmp_path / "serial"), "--quiet", *tiny]) == 0
    assert cli.main(["compare", "configs/quickstart.gin", "--out", str(tmp_path / "dask"), "--dask", "local:2", *tiny]) == 0
    captured = capsys.readouterr()
    assert "runs: 100%" in captured.err and "4/4" in captured.err
    assert (tmp_path / "dask" / "results.csv").read_bytes() == (tmp_path / "serial" / "results.csv").read_bytes()
    assert "compare.dask = 'local:2'" in (tmp_path / "dask" / "config.gin").read_text()
    (tmp_path / "broken_plugin.py").write_text(BROKEN)
    broken = [*tiny, "--gin-param", "compare.tasks = {'depth': 'depth_tagging(limit=30)', "
                                    "'broken': 'broken_depth(limit=30)'}", "--gin-param", "compare.seeds = [0]"]
    argv = ["compare", "configs/quickstart.gin", "--out", str(tmp_path / "broken"), "--dask", "local:2", "--quiet",
            "--import", str(tmp_path / "broken_plugin.py"), *broken]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "structattn compare: error: run 002_broken_full_s0 failed: RuntimeError: broken on purpose" in err
    assert "run 003_broken_hard-mask-dependency_s0 failed" in err
    assert records_in(tmp_path / "broken") == ["000_depth_full_s0.json", "001_depth_hard-mask-dependency_s0.json"]
    sys.modules.pop("broken_plugin", None)


def test_local_workers_do_not_trim_the_heap_after_every_free(executor):
    """Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536, which made training 8-9% slower on a worker than in
    the client (benchmarks/dask_compare.py); a local:N cluster raises it."""
    from structattn.experiments.executors import LOCAL_MALLOC_TRIM_THRESHOLD

    seen = executor.client.run(os.environ.get, "MALLOC_TRIM_THRESHOLD_")
    assert set(seen.values()) == {str(LOCAL_MALLOC_TRIM_THRESHOLD)}
