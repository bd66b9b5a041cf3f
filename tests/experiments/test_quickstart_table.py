"""scripts/quickstart_table.py: README's quickstart table against a results folder."""

import importlib.util
import os
from pathlib import Path

import pytest

from structattn.experiments.results import write_tables

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("quickstart_table", ROOT / "scripts" / "quickstart_table.py")
script = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(script)


def records(values):
    """Run records of one task: {setting: [test accuracies over seeds]} (dev = test - 0.01)."""
    out, index = [], 0
    for setting, accuracies in values.items():
        for seed, acc in enumerate(accuracies):
            out.append({"index": index, "run_id": f"{index:03d}", "task_label": "depth", "setting": setting,
                        "task": "depth_tagging(max_depth=5)", "seed": seed, "metric": "accuracy",
                        "metrics": {"test_accuracy": acc, "dev_accuracy": acc - 0.01, "majority_baseline": 0.25}})
            index += 1
    return out


def readme_with(folder: Path, tmp_path: Path, edit=lambda s: s) -> Path:
    """A README whose quickstart section holds the results table of ``folder`` (after ``edit``)."""
    body = (folder / "results.md").read_text().split("### depth\n", 1)[1]
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Set up and go\n\nWhat it prints:\n{edit(body)}\n## Next\n\n| a | b |\n|---|---|\n")
    return readme


@pytest.fixture
def folder(tmp_path):
    write_tables(records({"full": [0.41, 0.43], "soft": [0.90, 0.92]}), tmp_path / "res")
    return tmp_path / "res"


def test_matching_tables_pass(folder, tmp_path, capsys):
    assert script.main([str(folder), "--readme", str(readme_with(folder, tmp_path))]) == 0
    assert "matches" in capsys.readouterr().out


def test_a_changed_cell_or_row_fails_and_is_printed(folder, tmp_path, capsys):
    readme = readme_with(folder, tmp_path, lambda s: s.replace("0.420 ± 0.014", "0.421 ± 0.014"))
    assert script.main([str(folder), "--readme", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "full / test accuracy: README 0.421 ± 0.014, results 0.420 ± 0.014" in out
    readme = readme_with(folder, tmp_path, lambda s: s.replace("baseline 0.250", "baseline 0.287"))
    assert script.main([str(folder), "--readme", str(readme)]) == 1
    assert "caption: README" in capsys.readouterr().out
    write_tables(records({"full": [0.41, 0.43], "soft": [0.90, 0.92], "new": [0.5]}), folder)
    assert script.main([str(folder), "--readme", str(readme_with(folder, tmp_path))]) == 0
    capsys.readouterr()
    write_tables(records({"full": [0.41, 0.43]}), tmp_path / "other")
    assert script.main([str(tmp_path / "other"), "--readme", str(readme_with(folder, tmp_path))]) == 1
    out = capsys.readouterr().out
    assert "row 'soft': only in README" in out and "row 'new': only in README" in out


def test_a_readme_without_the_table_is_status_2(folder, tmp_path):
    (tmp_path / "R.md").write_text("# nothing\n")
    assert script.main([str(folder), "--readme", str(tmp_path / "R.md")]) == 2


def _asked_for_slow(config) -> bool:
    return "slow" in (config.option.markexpr or "") or os.environ.get("STRUCTATTN_RUN_QUICKSTART") == "1"


@pytest.mark.slow(reason="runs the whole quickstart: ~2 minutes on 2 idle CPU cores, much longer under load")
def test_readme_quickstart_table_is_regenerable(request):
    if not _asked_for_slow(request.config):
        pytest.skip("runs configs/quickstart.gin (~2 minutes on 2 idle cores): select with -m slow or set "
                    "STRUCTATTN_RUN_QUICKSTART=1")
    assert script.main([]) == 0, "README's quickstart table differs from a fresh run (differences printed above)"
