"""README.md is the front door of the docs site: short, its set-up commands intact, its headline table between
markers a script can replace, and every relative link in README.md and docs/*.md resolving to a file (and, for
``#anchor`` links, to a heading of that file, slugged as GitHub slugs it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 250
MAIN_JOB = ('pip install torch==2.13.0 && pip install -e ".[test,spacy,dask,hf,translation]" && '
            "structattn compare configs/quickstart.gin --out runs/quickstart")
TESTS = ('pip install torch==2.13.0 && pip install -e ".[test,spacy,dask,hf,translation,docs]" && '
         "python -m ruff check structattn tests scripts benchmarks examples && "
         "python -m sphinx -W --keep-going -q -b html docs docs/_build/html && python -m pytest -q")

FENCE = re.compile(r"^ *(`{3,}|~{3,})")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`+[^`]*`+")


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a markdown file outside fenced code blocks, 1-based numbered."""
    out, fence = [], None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if match and (fence is None or match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence)):
            fence = match.group(1) if fence is None else None
            continue
        if fence is None:
            out.append((number, line))
    return out


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (word characters, spaces and hyphens
    kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file (repeated headings get -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if match:
            slug = github_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            if count:
                seen[f"{slug}-{count}"] = 1
    return set(seen)


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link that is not a URL (inline code and code blocks left out)."""
    links = []
    for number, line in prose_lines(path):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: ...
                links.append((number, target))
    return links


def test_slug_matches_github() -> None:
    assert github_slug("Hugging Face encoders: attach, fine-tune, pretrain offline, probe") == \
        "hugging-face-encoders-attach-fine-tune-pretrain-offline-probe"
    assert github_slug("8. Real translation: Multi30k English -> German") == "8-real-translation-multi30k-english---german"
    assert github_slug("ssan on a pretrained model: use `soft=True`") == "ssan-on-a-pretrained-model-use-softtrue"
    assert github_slug("Dask: `--dask local:N` or `--dask ADDRESS`") == "dask---dask-localn-or---dask-address"


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; the front door keeps <= {MAX_README_LINES}"


def test_readme_keeps_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "## Set up and go" in text
    section = text.split("## Set up and go", 1)[1].split("\n## ", 1)[0]
    for command in (MAIN_JOB, TESTS):
        assert f"```bash\n{command}\n```" in section, f"README's 'Set up and go' lost the command: {command}"


def test_readme_headline_markers_surround_a_table() -> None:
    text = README.read_text(encoding="utf-8")
    section = text.split("## What the comparisons show", 1)[1].split("\n## ", 1)[0]
    assert section.count("<!-- headline:start -->") == 1 and section.count("<!-- headline:end -->") == 1
    inside = section.split("<!-- headline:start -->", 1)[1].split("<!-- headline:end -->", 1)[0].strip()
    rows = inside.splitlines()
    assert rows and all(row.startswith("|") for row in rows), "the headline markers must hold exactly the table"
    assert rows[0].startswith("| comparison |") and "verdict" in rows[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for line, target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{page.name}:{line}: {target} (no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked})")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{page.name}:{line}: {target} (no heading with anchor #{anchor} in {linked.name})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_readme_links_every_docs_page() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for _, target in relative_links(README)}
    missing = [p.name for p in PAGES[1:] if p.name != "README.md" and p.resolve() not in linked
               and p.name not in {"index.md", "changelog.md"}]
    assert not missing, f"README.md links no page of: {missing}"


def test_the_readme_test_command_is_what_ci_runs():
    """Each step of the README's test command is a line of .ci/run (pip as ``python -m pip install -q``), in order."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    at = 0
    for step in TESTS.split(" && "):
        line = step.replace("pip install ", "python -m pip install -q ", 1) if step.startswith("pip ") else step
        assert line in ci[at:], f"README step {step!r} is not in .ci/run (after line {at})"
        at = ci.index(line, at) + 1
