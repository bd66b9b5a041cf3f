"""Every .gin file in the repository loads, and builds a tiny model that runs forward.

Experiment and train configs are dry-run (every setting x task built and run forward on two sentences) with
their layer and head counts kept and widths shrunk; model-size files build a model of their own size and run
it forward; run-setting files are completed into a one-run tiny experiment (binding what they mark
``%gin.REQUIRED``) and dry-run.
"""

import re
from pathlib import Path

import gin
import pytest
import torch

from structattn.experiments import gin_setup
from structattn.encoders import EncoderConfig
from structattn.training import TrainConfig
from tests.threads import one_thread  # noqa: F401  (autouse fixture)

ROOT = Path(__file__).resolve().parents[1]
OUTPUTS = {"runs", "build", "dist"}  # top-level output folders (gitignored), not configs
CONFIGS = sorted(p for p in ROOT.rglob("*.gin") if p.relative_to(ROOT).parts[0] not in OUTPUTS
                 and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
                 and p.relative_to(ROOT).parts[:2] != ("tests", "fixtures"))  # test data, e.g. a kept record's config
PARTIAL = {"models", "runs"}  # folders of configs/ holding building blocks, included by experiments




def test_there_are_configs():
    names = {p.relative_to(ROOT).as_posix() for p in CONFIGS}
    assert {"configs/models/tiny.gin", "configs/models/small.gin", "configs/models/base.gin",
            "configs/runs/defaults.gin", "configs/quickstart.gin"} <= names


def test_base_size_is_transformer_base():
    gin_setup.parse(ROOT / "configs" / "models" / "base.gin")
    assert gin_setup.model_config() == EncoderConfig(d_model=512, num_layers=6, num_heads=8, ffn_dim=2048, dropout=0.1)


def shrink() -> list[str]:
    heads = gin.query_parameter("model.num_heads")
    return [f"model.d_model = {2 * heads}", "model.ffn_dim = 8", "training.max_steps = 1"]


def forward_once(plan: str) -> None:
    from structattn.experiments import build_model, make_providers, make_task, prepare_data
    from structattn.training import make_batch

    config = gin_setup.model_config()
    task = make_task("depth_tagging(limit=4)")
    providers = make_providers(["dependency"], {})
    items = task.splits()["train"][:2]
    data = prepare_data(task, providers, {}, quiet=True, items={"train": items, "test": items})
    model = build_model(task, len(data.vocab), plan, config, providers).eval()
    logits = model(make_batch(data.examples["train"], task.output))
    assert logits.shape[:2] == (2, max(len(x) for x in items)) and torch.isfinite(logits).all()


def load_plugins_named_in(path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A config whose usage line says ``--import FILE`` (e.g. examples/compare.gin) gets that plugin first,
    imported as a fresh process would, and forgotten afterwards (registries and modules restored), so that
    other tests can import the same file under their own name."""
    import sys

    from structattn import plugins
    from structattn.attention.base import ATTENTION
    from structattn.structures.providers.base import PROVIDERS
    from structattn.tasks.base import TASKS, task_names

    specs = re.findall(r"--import[ =](\S+)", path.read_text())
    if not specs:
        return
    task_names()  # built-ins register on first lookup: look up before the copy, so that undoing keeps them
    for registry in (ATTENTION, PROVIDERS, TASKS):
        registry.names()
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    for record in plugins.load_plugins([str(ROOT / s) if s.endswith(".py") else s for s in specs]):
        request.addfinalizer(lambda name=record["module"]: sys.modules.pop(name, None))


def skip_without_optional_models(path: Path) -> None:
    """A config that needs an optional parser says so (``# requires-spacy-model: NAME``); without it here the
    dry run cannot build its data, so it is skipped with the reason (and checked wherever the model is)."""
    import importlib.util

    for name in re.findall(r"^# requires-spacy-model: (\S+)", path.read_text(), flags=re.M):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{path.name} parses with the optional spaCy model {name!r}, which is not installed here "
                        "(pip install -e '.[czech]'; CC BY-NC-SA 3.0, never bundled)")


def fixture_sized_tasks() -> list[str]:
    """Multi30k subsamples larger than the fixture's 60 training pairs, cut to 40 (the dry run reads the fixture)."""
    try:
        tasks = gin.query_parameter("compare.tasks")
    except ValueError:
        return []
    if not isinstance(tasks, dict) or not any("train_size=" in t for t in tasks.values()):
        return []
    small = {k: re.sub(r"train_size=\d+", "train_size=40", v) if "translation_multi30k" in v else v
             for k, v in tasks.items()}
    return [f"compare.tasks = {small!r}"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_config_loads_and_runs_forward(path, monkeypatch, request, tmp_path):
    skip_without_optional_models(path)
    # Multi30k configs dry-run on the 100-line fixture (the real corpus is not shipped: STRUCTATTN_MULTI30K)
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(ROOT / "tests" / "fixtures" / "multi30k_small"))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    load_plugins_named_in(path, monkeypatch, request)
    parts = path.relative_to(ROOT).parts
    folder = parts[1] if parts[0] == "configs" and len(parts) > 2 else None
    if folder == "models":
        gin_setup.parse(path)
        forward_once("soft_bias(dependency)@0; full")
    elif folder in PARTIAL:  # a run setting: completed into a one-run tiny experiment
        gin_setup.parse(path, ["include 'models/tiny.gin'", "compare.tasks = ['depth_tagging(limit=4)']",
                               "compare.settings = ['hard_mask(dependency)']"])
        assert isinstance(gin_setup.training_config(), TrainConfig)
        assert gin_setup.compare(dry_run=True).runs()
    else:
        gin_setup.parse(path)
        gin_setup.parse(path, shrink() + fixture_sized_tasks())
        if "train.task" in gin.config_str():
            gin_setup.train("unused", dry_run=True)
        else:
            comparison = gin_setup.compare(dry_run=True)
            assert comparison.runs()
