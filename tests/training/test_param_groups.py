"""Weight decay only on weight matrices: never on LayerNorm gains, biases, attention bias tables or scales."""

import torch

from structattn.training import TrainConfig, Trainer
from structattn.training.param_groups import decays, parameter_groups
from tests.training.util import model

PLAN = "soft_bias(dependency, per_head=True, learnable_scale=True)@0; ssan(dependency, structure_bias=soft_bias)"


def expected_decay(name: str) -> bool:
    """The rule written out by name, independently of the module walk in ``decays``."""
    if ".variants." in name:  # inside a StructuredAttention module
        return name.endswith(("policy_query.weight", "policy_key.weight"))
    return name.endswith("weight") and "norm" not in name


def test_group_membership_parameter_by_parameter():
    net = model(20, PLAN)
    rule = decays(net)
    names = [n for n, _ in net.named_parameters()]
    assert set(rule) == set(names)
    assert any(n.endswith("variants.0.table") for n in names)  # per-head table: 2-D, still not decayed
    assert any(n.endswith("variants.0.scale") for n in names)
    assert any("structure_bias.table" in n for n in names)
    for name in names:
        assert rule[name] == expected_decay(name), name
    decayed, kept = parameter_groups(net, 0.3)
    params = dict(net.named_parameters())
    assert decayed["weight_decay"] == 0.3 and kept["weight_decay"] == 0.0
    assert {id(p) for p in decayed["params"]} == {id(params[n]) for n in names if expected_decay(n)}
    assert {id(p) for p in kept["params"]} == {id(params[n]) for n in names if not expected_decay(n)}


def test_decay_step_with_zero_gradient_touches_only_weight_matrices():
    net = model(20, PLAN)
    with torch.no_grad():
        for p in net.parameters():
            p.uniform_(0.5, 1.5)  # nonzero everywhere, so decay would show
    trainer = Trainer(net, TrainConfig(lr=0.1, weight_decay=1.0, warmup_steps=0, max_steps=1), "token", quiet=True)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    for p in net.parameters():
        p.grad = torch.zeros_like(p)
    trainer.optimizer.step()
    after = dict(net.named_parameters())
    for name in before:
        if expected_decay(name):
            assert (after[name].abs() < before[name].abs()).all(), name
        else:
            assert torch.equal(after[name], before[name]), name
    assert any(n.endswith("variants.0.table") for n in before) and any("norm.weight" in n for n in before)
    assert expected_decay("encoder.embedding.weight") and expected_decay("encoder.layers.0.ffn.0.weight")


def test_the_translation_trainer_uses_the_same_groups():
    from structattn.training.seq2seq import Seq2SeqTrainer
    from tests.seq2seq.helpers import tiny_model

    net = tiny_model("soft_bias(dependency, per_head=True)")
    trainer = Seq2SeqTrainer(net, TrainConfig(weight_decay=0.2, max_steps=1))
    by_id = {id(p): group["weight_decay"] for group in trainer.optimizer.param_groups for p in group["params"]}
    rule = decays(net)
    assert any(n.endswith(".table") for n in rule) and not all(rule.values())
    for name, p in net.named_parameters():
        assert by_id[id(p)] == (0.2 if rule[name] else 0.0), name
        if name.endswith(".table"):
            assert by_id[id(p)] == 0.0


def test_a_model_may_bring_its_own_groups():
    """HF fine-tuning models define parameter_groups(config) (pretrained vs new learning rates): used as given."""
    net = model(20, "full")

    def own_groups(config):
        head = list(net.head.parameters())
        rest = [p for p in net.parameters() if all(p is not h for h in head)]
        return [{"params": rest, "lr": config.lr}, {"params": head, "lr": 7e-3, "weight_decay": 0.0}]

    net.parameter_groups = own_groups
    trainer = Trainer(net, TrainConfig(lr=1e-4, warmup_steps=0, max_steps=1), "token", quiet=True)
    assert [g["lr"] for g in trainer.optimizer.param_groups] == [1e-4, 7e-3]
    assert trainer.optimizer.param_groups[1]["params"] == list(net.head.parameters())
