"""examples/plugin.py (an outside-the-package variant, provider and task) passes the same contract kit as
the built-in pieces, and runs end to end through the CLI from another working folder (``compare --import``,
then ``eval``, ``merge`` and ``probe``)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch

from structattn.testing import check_attention, check_provider

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module", autouse=True)
def plugin():
    """examples/plugin.py imported as ``plugin`` (the name ``--import`` gives it); its three registrations are
    removed afterwards, so later tests see only the built-in pieces."""
    from structattn.attention import ATTENTION
    from structattn.structures.providers import PROVIDERS
    from structattn.tasks.base import TASKS

    spec = importlib.util.spec_from_file_location("plugin", EXAMPLES / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["plugin"] = module
    spec.loader.exec_module(module)
    yield module
    ATTENTION.unregister("gaussian_bias")
    PROVIDERS.unregister("chain")
    TASKS.unregister("chain_position")
    del sys.modules["plugin"]


def gaussian_reference(q, k, v, structure, module):
    """float64, per query and key: softmax over keys at distance >= 0 of q.k / sqrt(d) - dist^2 / (2 sigma^2)."""
    b, h, n, d = q.shape
    sigma = module.log_sigma.double().exp()
    out = torch.zeros(b, h, n, d, dtype=torch.float64)
    weights = torch.zeros(b, h, n, n, dtype=torch.float64)
    for x in range(b):
        for head in range(h):
            for i in range(n):
                keys = [j for j in range(n) if structure.distance[x, i, j] >= 0 and structure.token_mask[x, i]]
                if not keys:
                    continue
                scores = torch.stack([
                    q[x, head, i].double() @ k[x, head, j].double() / math.sqrt(d)
                    - float(structure.distance[x, i, j]) ** 2 / (2 * sigma[head] ** 2)
                    for j in keys
                ])
                for w, j in zip(torch.softmax(scores, 0), keys):
                    weights[x, head, i, j] = w
                    out[x, head, i] = out[x, head, i] + w * v[x, head, j].double()
    return out, weights


def random_sigmas(num_heads: int, head_dim: int):
    """Distinct widths per head, so that a head mix-up fails."""
    from structattn.attention import get_attention

    module = get_attention("gaussian_bias", num_heads=num_heads, head_dim=head_dim)
    with torch.no_grad():
        module.log_sigma.copy_(torch.linspace(-0.5, 1.0, num_heads))
    return module


def test_gaussian_bias_passes_the_attention_contract():
    report = check_attention("gaussian_bias", gaussian_reference, make=random_sigmas)
    assert report["reference"] == "passed" and report["parameter_gradients"] == "passed"


def test_gaussian_bias_on_forests_and_the_chain_provider():
    from structattn.structures import Sentence, get_provider
    from structattn.testing import dependency_structure

    def chain(lengths, generator):
        return get_provider("chain").batch([Sentence([f"w{i}" for i in range(n)], id=f"c{n}") for n in lengths])

    check_attention("gaussian_bias", gaussian_reference, make=random_sigmas, structure_factory=chain)
    check_attention("gaussian_bias", gaussian_reference, make=random_sigmas,
                    structure_factory=lambda lengths, g: dependency_structure(lengths, g, forests=True))


def test_chain_passes_the_provider_contract():
    report = check_provider("chain", lambda s: [[abs(i - j) for j in range(len(s))] for i in range(len(s))])
    assert report["symmetry"] == report["networkx"] == report["oracle"] == "passed"


def test_chain_position_labels_positions_modulo_k():
    from structattn.tasks.base import get_task

    task = get_task("chain_position", modulus=4, limit=30)
    item = task.splits()["train"][0]
    assert task.label(item) == [i % 4 for i in range(len(item))] and task.num_labels == 4
    with pytest.raises(ValueError, match="modulus must be >= 2, got 1"):
        get_task("chain_position", modulus=1)


def structattn(*argv: str, cwd: Path) -> str:
    """Run the CLI in a fresh process from ``cwd`` (so the plugin is imported there, not in this process)."""
    import os
    import subprocess

    env = {**os.environ, "CI": "1", "PYTHONPATH": ""}
    done = subprocess.run([sys.executable, "-c", "import sys; from structattn.cli import main; sys.exit(main())", *argv],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"structattn {' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """examples/compare.gin (2 settings x 1 seed x 20 steps) run from an unrelated working folder."""
    cwd = tmp_path_factory.mktemp("elsewhere")
    out = cwd / "run"
    structattn("compare", str(EXAMPLES / "compare.gin"), "--import", str(EXAMPLES / "plugin.py"), "--out", str(out),
               "--quiet", "--no-plots", cwd=cwd)
    return cwd, out


def test_the_example_comparison_runs_from_another_folder_and_replays_the_plugin(example_run):
    import csv
    import json

    cwd, out = example_run
    rows = list(csv.DictReader((out / "results.csv").open()))  # long format: one row per run and metric
    assert sorted({r["setting"] for r in rows}) == ["full", "gaussian(chain)"]
    assert {r["setting"] for r in rows if r["metric"] == "tree_uuas_best"} == {"full", "gaussian(chain)"}
    provenance = json.loads((out / "provenance.json").read_text())
    assert [p["module"] for p in provenance["plugins"]] == ["plugin"]
    # eval and merge without --import: the recorded plugin is replayed
    (checkpoint,) = out.glob("runs/*gaussian*/checkpoints/best.pt")
    scores = json.loads(structattn("eval", str(checkpoint), "--quiet", cwd=cwd).strip().splitlines()[-1])
    record = json.loads(next(out.glob("runs/*gaussian*.json")).read_text())
    assert scores["accuracy"] == pytest.approx(record["metrics"]["test_accuracy"])
    structattn("merge", str(out), "--out", str(cwd / "merged"), "--no-plots", cwd=cwd)
    merged = list(csv.DictReader((cwd / "merged" / "results.csv").open()))
    assert sorted((r["run_id"], r["metric"], r["value"]) for r in merged) == sorted(
        (r["run_id"], r["metric"], r["value"]) for r in rows)


def test_probe_replays_the_plugin_from_another_folder(example_run):
    """``structattn probe`` on the plugin variant's checkpoint, without --import: the recorded plugin is
    replayed, and every layer gets its structural-probe and tree-induction rows (model and random control)."""
    import csv

    cwd, out = example_run
    from structattn.structures import bundled_treebank

    (checkpoint,) = out.glob("runs/*gaussian*/checkpoints/best.pt")
    structattn("probe", str(checkpoint), "--treebank", str(bundled_treebank()), "--limit", "30", "--epochs", "2",
               "--out", str(cwd / "probe"), "--quiet", cwd=cwd)
    rows = list(csv.DictReader((cwd / "probe" / "probe.csv").open()))
    assert {r["model"] for r in rows} == {checkpoint.parents[1].name, "random control"}
    found = {(r["model"], r["layer"], r["probe"]) for r in rows}
    for model in (checkpoint.parents[1].name, "random control"):
        assert {(model, str(l), p) for l in (0, 1, 2) for p in ("structural_distance", "structural_depth")} <= found
        assert {(model, "1", "tree_induction"), (model, "2", "tree_induction")} <= found
    assert all(math.isfinite(float(r["value"])) for r in rows)


def test_the_learned_sigma_is_recorded(example_run):
    """learned_quantities() reaches the run record: one sigma row per head for each layer, positive, moved
    from its initial value by the 20 training steps."""
    import json

    _, out = example_run
    record = json.loads(next(out.glob("runs/*gaussian*.json")).read_text())
    sigmas = [q for q in record["bias"] if q["name"] == "sigma"]
    assert [q["layer"] for q in sigmas] == [0, 1], record["bias"]
    for q in sigmas:
        assert q["labels"] == ["sigma"] and len(q["values"]) == 2  # model.num_heads = 2 in examples/compare.gin
        values = [row[0] for row in q["values"]]
        assert all(v > 0 for v in values) and any(abs(v - 2.0) > 1e-6 for v in values)
    full = json.loads(next(out.glob("runs/*_full_*.json")).read_text())
    assert not any(q["name"] == "sigma" for q in full["bias"])
