"""Check that README.md's quickstart table is what ``configs/quickstart.gin`` produces.

    python scripts/quickstart_table.py                 # run the quickstart into a temporary folder (~2 min)
    python scripts/quickstart_table.py runs/quickstart # or read an existing results folder

Compares the results table (and its caption line with the majority baseline) in the folder's
``results.md`` with the one in README.md's "Set up and go" section, prints every differing cell, and exits
with status 1 on a mismatch (0 when they agree, 2 when a table is missing). It never edits README.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Set up and go"


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


def differences(expected: tuple[str, list[list[str]]], actual: tuple[str, list[list[str]]]) -> list[str]:
    """Human-readable differences between README's table (``expected``) and the results table."""
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
        for column, (a, b) in enumerate(zip(rows_e[name], rows_a[name])):
            if a != b:
                label = header[column] if column < len(header) else column
                out.append(f"{name} / {label}: README {a}, results {b}")
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
    diff = differences(expected, actual)
    for line in diff:
        print(line)
    print(f"README quickstart table {'differs from' if diff else 'matches'} the results ({len(diff)} differences)")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
