"""Config values of the wrong type fail with an error naming the binding, through gin and the CLI."""

import pytest

from structattn import cli
from structattn.experiments import gin_setup
from structattn.training.values import as_float, as_int

CONFIG = "configs/quickstart.gin"


@pytest.mark.parametrize("binding, message", [
    ("training.max_steps = 'ten'", "training.max_steps must be an integer, got 'ten'"),
    ("training.max_steps = True", "training.max_steps must be an integer, got True"),
    ("training.batch_size = 8.5", "training.batch_size must be an integer, got 8.5"),
    ("training.lr = '1e-3'", "training.lr must be a number, got '1e-3'"),
    ("training.weight_decay = None", "training.weight_decay must be a number, got None"),
    ("model.d_model = '16'", "model.d_model must be an integer, got '16'"),
    ("model.dropout = 'none'", "model.dropout must be a number, got 'none'"),
    ("data.min_freq = 1.5", "data.min_freq must be an integer, got 1.5"),
    ("data.lowercase = 1", "data.lowercase must be True or False, got 1"),
    ("compare.seeds = [0, 'one']", "compare.seeds[1] must be an integer, got 'one'"),
    ("compare.threads = 'all'", "compare.threads must be an integer, got 'all'"),
])
def test_bad_values_name_the_binding(binding, message):
    gin_setup.parse(CONFIG, [binding])
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        gin_setup.compare(dry_run=True)


def test_integral_floats_are_integers():
    gin_setup.parse(CONFIG, ["training.max_steps = 1e3"])
    assert gin_setup.training_config().max_steps == 1000 and isinstance(gin_setup.training_config().max_steps, int)
    assert as_float("x", 2) == 2.0 and isinstance(as_float("x", 2), float)
    with pytest.raises(ValueError, match="x must be an integer, got inf"):
        as_int("x", float("inf"))


def test_the_cli_prints_the_binding(capsys, tmp_path):
    assert cli.main(["train", "configs/train_example.gin", "--out", str(tmp_path / "o"),
                     "--gin-param", "training.max_steps = 'ten'"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == "structattn train: error: training.max_steps must be an integer, got 'ten'", err
    assert not (tmp_path / "o").exists()
