"""Check that README.md's quickstart table is what ``configs/quickstart.gin`` produces.

    python scripts/quickstart_table.py                 # run the quickstart into a temporary folder (~2 min)
    python scripts/quickstart_table.py runs/quickstart # or read an existing results folder

Compares the results table (and its caption line with the majority baseline) in the folder's
``results.md`` with the one in README.md's "Set up and go" section, prints every differing cell, and exits
with status 1 on a mismatch (0 when they agree, 2 when a table is missing). It never edits README.md.

Tolerance. The numbers depend on the CPU: the soft_bias row's backward rounds as the CPU's BLAS does, so the
2-core AMD EPYC VM gives 0.897 ± 0.021 test / 0.891 ± 0.024 dev and the Intel Xeon VM 0.903 ± 0.017 /
0.896 ± 0.025 from the same code (README documents both). A "mean ± std over k seeds" cell therefore
matches when, with README's std ``s`` as the reference spread,

* the means differ by at most ``2 s / sqrt(k)`` (two standard errors of a k-seed mean), and
* the stds differ by at most ``2 s / sqrt(2 (k - 1))`` (two standard errors of a sample std under normality;
  for k = 1 the std must agree),

each plus 0.001 for the rounding of the two printed 3-decimal values. The rounding differences between
CPUs move a mean by a fraction of the seed spread (0.006 where 2 standard errors are 0.024), while a real
change of the method or the data that moves a row by more than two standard errors is reported; a row
with no spread (``s = 0``) must match to the rounding. README's std, not the run's, sets the bound, so a
run whose seeds scatter more cannot widen its own tolerance. Every other cell (setting names, seed counts)
and the caption (majority baseline: data only, the same on every CPU) must match exactly. Cells that
differ within the tolerance are listed as such; a run within it never reports "differs".
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Set up and go"
STANDARD_ERRORS = 2.0  # how far a mean (or std) may move, in standard errors of README's seeds
ROUNDING = 0.001  # two printed 3-decimal values may each be 0.0005 off
_MEAN_STD = re.compile(r"^(-?\d+(?:\.\d+)?) ± (\d+(?:\.\d+)?)$")


def _cells(line: str) -> list[str]:
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


def tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """Every markdown table of ``text`` as ``(caption, rows)``: the caption is the nearest preceding
    non-empty line that starts with a backtick (the task spec line); rows exclude the ``|---|`` rule."""
    lines, out, k = text.splitlines(), [], 0
    while k < len(lines):
        if not lines[k].startswith("|"):
            k += 1
            continue
        caption = next((lines[j].strip() for j in range(k - 1, -1, -1) if lines[j].strip()), "")
        rows = []
        while k < len(lines) and lines[k].startswith("|"):
            if not set(lines[k].replace("|", "").strip()) <= set("-: "):
                rows.append(_cells(lines[k]))
            k += 1
        out.append((caption if caption.startswith("`") else "", rows))
    return out


def readme_table(readme: str) -> tuple[str, list[list[str]]] | None:
    """The first table of README's quickstart section."""
    start = readme.find(SECTION)
    if start < 0:
        return None
    end = readme.find("\n## ", start + len(SECTION))
    found = tables(readme[start:end if end > 0 else None])
    return found[0] if found else None


def allowed_moves(std: float, seeds: int) -> tuple[float, float]:
    """How far a mean and a std over ``seeds`` seeds may move from README's (see the module docstring)."""
    mean = STANDARD_ERRORS * std / math.sqrt(seeds) + ROUNDING
    spread = STANDARD_ERRORS * std / math.sqrt(2 * (seeds - 1)) + ROUNDING if seeds > 1 else ROUNDING
    return mean, spread


def cell_verdict(expected: str, actual: str, seeds: int) -> str | None:
    """``None`` when the cells are equal; ``"within ..."`` when two "mean ± std" cells differ within the
    tolerance; else why they differ."""
    if expected == actual:
        return None
    e, a = _MEAN_STD.match(expected), _MEAN_STD.match(actual)
    if e is None or a is None:
        return "differs"
    (mean_e, std_e), (mean_a, std_a) = (tuple(map(float, m.groups())) for m in (e, a))
    mean_ok, std_ok = allowed_moves(std_e, seeds)
    moved, spread = abs(mean_a - mean_e), abs(std_a - std_e)
    if moved > mean_ok + 1e-12:
        return f"mean moved {moved:.3f}, more than the {mean_ok:.3f} allowed over {seeds} seeds"
    if spread > std_ok + 1e-12:
        return f"std moved {spread:.3f}, more than the {std_ok:.3f} allowed over {seeds} seeds"
    return f"within tolerance (mean moved {moved:.3f} <= {mean_ok:.3f}, std {spread:.3f} <= {std_ok:.3f})"


def _seeds(row: list[str], header: list[str]) -> int:
    """The row's seed count (its ``seeds`` column; 1 when there is none)."""
    if "seeds" in header and header.index("seeds") < len(row) and row[header.index("seeds")].isdigit():
        return max(1, int(row[header.index("seeds")]))
    return 1


def differences(expected: tuple[str, list[list[str]]], actual: tuple[str, list[list[str]]],
                notes: list[str] | None = None) -> list[str]:
    """Differences between README's table (``expected``) and the results table beyond the tolerance;
    differences within it are appended to ``notes`` when given."""
    out = []
    if expected[0] != actual[0]:
        out.append(f"caption: README {expected[0]!r}, results {actual[0]!r}")
    header = expected[1][0] if expected[1] else []
    rows_e = {r[0]: r for r in expected[1][1:]}
    rows_a = {r[0]: r for r in actual[1][1:]}
    if (actual[1][0] if actual[1] else []) != header:
        out.append(f"header: README {header}, results {actual[1][0] if actual[1] else []}")
    for name in [*rows_e, *(n for n in rows_a if n not in rows_e)]:
        if name not in rows_a or name not in rows_e:
            out.append(f"row {name!r}: only in {'README' if name in rows_e else 'the results'}")
            continue
        seeds = _seeds(rows_e[name], header)
        for column, (a, b) in enumerate(zip(rows_e[name], rows_a[name])):
            verdict = cell_verdict(a, b, seeds)
            if verdict is None:
                continue
            label = header[column] if column < len(header) else column
            line = f"{name} / {label}: README {a}, results {b}"
            if verdict.startswith("within"):
                if notes is not None:
                    notes.append(f"{line}: {verdict}")
            else:
                out.append(line if verdict == "differs" else f"{line}: {verdict}")
    return out


def results_table(folder: Path, caption: str) -> tuple[str, list[list[str]]] | None:
    """The table of ``folder/results.md`` whose caption names the same task as ``caption`` (else the first)."""
    found = tables((folder / "results.md").read_text())
    spec = caption.split("`")[1] if caption.count("`") >= 2 else None
    return next((t for t in found if spec and t[0].split("`")[1:2] == [spec]), found[0] if found else None)


def run_quickstart(folder: Path) -> None:
    from structattn import cli

    code = cli.main(["compare", str(ROOT / "configs" / "quickstart.gin"), "--out", str(folder), "--no-plots",
                     "--quiet"])
    if code:
        raise SystemExit(f"the quickstart failed (status {code})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", help="a results folder of configs/quickstart.gin (default: run it)")
    parser.add_argument("--readme", default=str(ROOT / "README.md"), help="the README to check")
    args = parser.parse_args(argv)
    expected = readme_table(Path(args.readme).read_text())
    if expected is None:
        print(f"no table in the {SECTION!r} section of {args.readme}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.results) if args.results else Path(tmp) / "quickstart"
        if not args.results:
            run_quickstart(folder)
        actual = results_table(folder, expected[0])
    if actual is None:
        print(f"no table in {folder / 'results.md'}", file=sys.stderr)
        return 2
    notes: list[str] = []
    diff = differences(expected, actual, notes)
    for line in notes + diff:
        print(line)
    if diff:
        print(f"README quickstart table differs from the results ({len(diff)} differences beyond the tolerance)")
        return 1
    how = f"{len(notes)} cells within the seed-spread tolerance" if notes else "exactly"
    print(f"README quickstart table matches the results ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
