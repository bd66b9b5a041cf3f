"""Attention plans and call specs: literal cases and every error path."""

import pytest

from structattn.encoders import CallSpec, HeadGroup, parse_call, parse_plan


def test_parse_call_literals():
    assert parse_call("full") == CallSpec("full")
    spec = parse_call("soft_bias(dependency, max_distance=8, per_head=True)")
    assert spec == CallSpec("soft_bias", ("dependency",), {"max_distance": 8, "per_head": True})
    assert str(spec) == "soft_bias(dependency, max_distance=8, per_head=True)"
    assert parse_call("window(radius=3, global_tokens=(0, -1))").options == {"radius": 3, "global_tokens": (0, -1)}


@pytest.mark.parametrize("text", ["soft_bias(", "a.b(1)", "f(x=g())", "f(**d)", "1 + 2"])
def test_parse_call_rejects(text):
    with pytest.raises(ValueError, match="task"):
        parse_call(text, "task")


def test_plan_every_layer_and_default():
    plan = parse_plan("soft_bias(dependency)@0-1; full", num_layers=4, num_heads=4)
    assert [g[0].variant for g in plan] == ["soft_bias", "soft_bias", "full", "full"]
    assert plan[0] == [HeadGroup("soft_bias", "dependency", 4, {})]
    assert plan[3] == [HeadGroup("full", None, 4, {})]


def test_plan_layer_lists_and_options():
    plan = parse_plan("ssan(dependency)@0; hard_mask(window3, radius=2)@1,3; full", num_layers=4, num_heads=2)
    assert [g[0].label for g in plan] == ["ssan(dependency)", "hard_mask(window3)", "full", "hard_mask(window3)"]
    assert plan[1][0].options == {"radius": 2}


def test_plan_head_split():
    (groups,) = parse_plan("hard_mask(dependency)*2 + soft_bias(window) + full", num_layers=1, num_heads=7)
    assert [(g.variant, g.structure, g.num_heads) for g in groups] == [
        ("hard_mask", "dependency", 2), ("soft_bias", "window", 3), ("full", None, 2)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "non-empty"),
        ("full@5", "outside 0..2"),
        ("full@0; soft_bias(dependency)@0; full", "named twice"),
        ("full@0", r"leaves layers \[1, 2\]"),
        ("full; soft_bias(dependency)", "more than one segment"),
        ("full*3", "do not add up"),
        ("full*2 + full*2 + full", "do not add up"),
        ("full*0", "positive head count"),
        ("full@a-b", "bad layer range"),
        ("soft_bias(dependency, window)", "at most one structure"),
        ("soft_bias(3)", "structure name must be a name"),
        ("full(", "cannot parse"),
    ],
)
def test_plan_errors_quote_the_plan(text, message):
    with pytest.raises(ValueError, match=message):
        parse_plan(text, num_layers=3, num_heads=4)
