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
    readme = readme_with(folder, tmp_path, lambda s: s.replace("0.420 ± 0.014", "0.470 ± 0.014"))
    assert script.main([str(folder), "--readme", str(readme)]) == 1
    out = capsys.readouterr().out
    assert "full / test accuracy: README 0.470 ± 0.014, results 0.420 ± 0.014: mean moved 0.050" in out
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


AMD = {"full": ("0.416 ± 0.008", "0.426 ± 0.005"), "soft_bias(dep)": ("0.897 ± 0.021", "0.891 ± 0.024"),
       "hard_mask(dep)": ("0.637 ± 0.005", "0.642 ± 0.004")}  # README, the 2-core AMD EPYC VM
XEON = {**AMD, "soft_bias(dep)": ("0.903 ± 0.017", "0.896 ± 0.025")}  # README, the Intel Xeon VM
CAPTION = "`depth_tagging(max_depth=5)` — accuracy, mean ± std over seeds; majority-class baseline 0.287"


def table(rows: dict[str, tuple[str, str]]) -> str:
    lines = [CAPTION, "", "| setting | test accuracy | dev accuracy | seeds |", "|---|---:|---:|---:|"]
    return "\n".join(lines + [f"| {name} | {test} | {dev} | 3 |" for name, (test, dev) in rows.items()]) + "\n"


def fabricated(tmp_path: Path, readme_rows: dict, result_rows: dict) -> list[str]:
    (tmp_path / "res").mkdir(exist_ok=True)
    (tmp_path / "res" / "results.md").write_text(f"# Results\n\n### depth\n\n{table(result_rows)}")
    (tmp_path / "README.md").write_text(f"# x\n\n## Set up and go\n\nWhat it prints:\n\n{table(readme_rows)}\n## Next\n")
    return [str(tmp_path / "res"), "--readme", str(tmp_path / "README.md")]


@pytest.mark.parametrize("readme,results", [(AMD, XEON), (XEON, AMD)], ids=["readme-amd", "readme-xeon"])
def test_both_documented_cpus_match(tmp_path, capsys, readme, results):
    """The soft_bias row rounds differently on the Xeon: it used to be reported as a difference (exit 1)."""
    assert script.main(fabricated(tmp_path, readme, results)) == 0
    out = capsys.readouterr().out
    assert "differs" not in out and "matches the results (2 cells within the seed-spread tolerance)" in out
    assert "soft_bias(dep) / test accuracy: README" in out and "within tolerance (mean moved 0.006" in out


@pytest.mark.parametrize("row,column", [("soft_bias(dep)", 0), ("full", 0), ("hard_mask(dep)", 1)])
@pytest.mark.parametrize("shift", [0.05, -0.05])
def test_a_row_moved_by_five_points_fails(tmp_path, capsys, row, column, shift):
    moved = dict(AMD)  # README's own table with one cell moved by exactly 0.05
    cells = list(moved[row])
    mean, std = cells[column].split(" ± ")
    cells[column] = f"{float(mean) + shift:.3f} ± {std}"
    moved[row] = tuple(cells)
    assert script.main(fabricated(tmp_path, AMD, moved)) == 1
    out = capsys.readouterr().out
    label = ["test accuracy", "dev accuracy"][column]
    assert f"{row} / {label}: README {AMD[row][column]}, results {cells[column]}: mean moved 0.05" in out
    assert "differs from the results (1 differences beyond the tolerance)" in out


def test_tolerance_rule():
    assert script.allowed_moves(0.021, 3) == pytest.approx((2 * 0.021 / 3**0.5 + 0.001, 0.021 + 0.001))
    assert script.allowed_moves(0.0, 3) == (0.001, 0.001)  # no spread: equal to the rounding
    assert script.cell_verdict("0.500", "0.500", 1) is None and script.cell_verdict("3", "4", 3) == "differs"
    assert script.cell_verdict("0.500 ± 0.000", "0.502 ± 0.000", 3).startswith("mean moved 0.002")
    assert script.cell_verdict("0.500 ± 0.030", "0.500 ± 0.070", 3).startswith("std moved 0.040")


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
