"""Every fenced code block in README.md and docs/**/*.md (every page of the docs site) runs as printed.

Convention (checked by ``test_fence_convention``):

* Every fence names its language. ``python`` and ``bash`` blocks are run; ``text`` (output listings, command
  synopses with ``[optional]`` arguments) and ``gin`` (config fragments) are shown only.
* HTML comments on the lines right before a fence mark the block (several may be stacked):
  ``<!-- slow: REASON -->`` runs it only under ``-m slow`` (long trainings, whole comparisons);
  ``<!-- needs: NAME[, NAME] -->`` runs it only where every NAME is here (``gpu``: a CUDA device; any other
  NAME: an importable module or installed spaCy package, e.g. ``cs_core_news_sm``), else skips naming what
  is missing; ``<!-- no-run: REASON -->`` never runs it (only its syntax is checked), e.g. the command
  that runs this whole test suite.

How blocks run: the blocks of one file run in file order in one fresh Python process per file, with the
working folder a new temporary folder holding symlinks to the repository's ``benchmarks``, ``configs``,
``examples``, ``scripts``, ``structattn`` and ``tests`` (so paths printed relative to the repository root
resolve, and whatever a block writes lands in the temporary folder). A python block runs as a script
(``runpy.run_path(..., run_name="__main__")``: fresh globals, so each block must import and define what it
uses; files and registrations made by earlier blocks of the same file persist, as when a reader pastes
the blocks in order); its tracebacks point at the line of the markdown file. A bash block runs with
``bash -e -o pipefail``, with this interpreter's ``python`` and ``structattn`` first on ``PATH``. ``pip`` is
replaced there by a checker that installs nothing: it fails unless the packages and extras the line asks
for are installed here at the versions it names, so an install line goes stale visibly instead of
reinstalling into the test environment. The default run executes the fast blocks only; ``-m slow`` runs the
selected slow blocks of a file after (and between) its fast blocks, which serve as their set-up; a slow block
that needs an earlier slow block's output needs that one selected too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# README.md and every page under docs/ (the site's pages, docs/reference/ included; not the built site)
DOCS = [ROOT / "README.md", *sorted(path for path in (ROOT / "docs").rglob("*.md") if "_build" not in path.parts)]
RUN_LANGUAGES = {"python", "bash"}
SHOW_LANGUAGES = {"text", "gin"}
LINKED = ("benchmarks", "configs", "examples", "scripts", "structattn", "tests")
FAST_TIMEOUT_S = 600  # all fast blocks of one file together
SLOW_TIMEOUT_S = 3600

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARKER = re.compile(r"^<!--\s*(?P<key>[a-z-]+)\s*(?::\s*(?P<value>.*?))?\s*-->\s*$")


@dataclass
class Block:
    """One fenced block: ``doc`` relative to the repository, ``line`` the 1-based line of its opening fence."""

    doc: str
    line: int
    language: str
    code: str
    slow: str | None = None  # reason, "" when given without one
    needs: list[str] = field(default_factory=list)
    no_run: str | None = None
    problems: list[str] = field(default_factory=list)  # convention violations, reported by test_fence_convention

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_blocks(path: Path, doc: str | None = None) -> list[Block]:
    """The fenced blocks of a markdown file with the marker comments right above each fence (``doc``: the name
    to report, by default the path relative to the repository)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    doc = doc or path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    k = 0
    while k < len(lines):
        match = FENCE.match(lines[k])
        if not match:
            k += 1
            continue
        fence, info = match["fence"], match["info"].strip()
        end = next((j for j in range(k + 1, len(lines))
                    if lines[j].strip().startswith(fence[0] * len(fence)) and not lines[j].strip().strip(fence[0])), None)
        block = Block(doc, k + 1, info.split()[0] if info else "", "".join(line + "\n" for line in lines[k + 1:end]))
        if match["indent"]:
            block.problems.append("an indented fence (write fences at column 0)")
        if end is None:
            block.problems.append("no closing fence")
            end = len(lines)
        _read_markers(block, lines, k)
        blocks.append(block)
        k = end + 1
    return blocks


def _read_markers(block: Block, lines: list[str], fence_index: int) -> None:
    j = fence_index - 1
    while j >= 0 and lines[j].lstrip().startswith("<!--"):
        marker = MARKER.match(lines[j].strip())
        key = marker["key"] if marker else None
        value = (marker["value"] or "") if marker else ""
        if key == "slow":
            block.slow = value
        elif key == "needs" and value:
            block.needs = [name.strip() for name in value.split(",") if name.strip()]
        elif key == "no-run" and value:
            block.no_run = value
        else:
            block.problems.append(f"line {j + 1}: unknown marker {lines[j].strip()!r} (known: <!-- slow[: REASON] -->, "
                                  "<!-- needs: NAME[, NAME] -->, <!-- no-run: REASON -->)")
        j -= 1


BLOCKS = [block for doc in DOCS for block in parse_blocks(doc)]
RUNNABLE = [block for block in BLOCKS if block.language in RUN_LANGUAGES]


def missing_needs(block: Block) -> list[str]:
    """The names in ``block.needs`` that this environment lacks."""
    missing = []
    for name in block.needs:
        if name == "gpu":
            import torch

            if not torch.cuda.is_available():
                missing.append("gpu (no CUDA device)")
        elif importlib.util.find_spec(name) is None:
            missing.append(f"{name} (not installed)")
    return missing


def asked_for_slow(config: pytest.Config) -> bool:
    return "slow" in (config.option.markexpr or "")


# ---------------------------------------------------------------------------------------------------- convention


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fence_convention(doc: Path) -> None:
    """Every fence names a known language, is closed, and carries only known markers."""
    problems = []
    for block in parse_blocks(doc):
        if block.language not in RUN_LANGUAGES | SHOW_LANGUAGES:
            problems.append(f"{block.name}: fence language {block.language or '(none)'!r}; use one of "
                            f"{sorted(RUN_LANGUAGES | SHOW_LANGUAGES)} (text: output listings and synopses, gin: "
                            "config fragments)")
        problems += [f"{block.name}: {problem}" for problem in block.problems]
        if block.language in SHOW_LANGUAGES and (block.slow is not None or block.needs or block.no_run):
            problems.append(f"{block.name}: a {block.language} block is never run; its marker means nothing")
    assert not problems, "\n".join(problems)


def test_parser_reads_markers_and_languages(tmp_path: Path) -> None:
    """The block reader on a literal file: languages, line numbers, stacked markers, unknown markers."""
    text = textwrap.dedent("""\
        # t
        <!-- slow: two minutes -->
        <!-- needs: gpu, cs_core_news_sm -->
        ```bash
        echo hi
        ```
        <!-- skip -->
        ````python
        x = 1
        ```
        ````
        ```
        ```
        ```text
        out
        ```
        """)
    path = tmp_path / "t.md"
    path.write_text(text, encoding="utf-8")
    blocks = parse_blocks(path, "t.md")
    assert [(b.line, b.language) for b in blocks] == [(4, "bash"), (8, "python"), (12, ""), (14, "text")]
    assert blocks[0].slow == "two minutes" and blocks[0].needs == ["gpu", "cs_core_news_sm"] and blocks[0].code == "echo hi\n"
    assert blocks[1].code == "x = 1\n```\n" and blocks[1].slow is None and "unknown marker" in blocks[1].problems[0]
    assert blocks[2].code == "" and blocks[3].code == "out\n" and not blocks[3].problems


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: f"{b.name}-{b.language}")
def test_block_syntax(block: Block) -> None:
    """Every runnable block parses, slow, no-run and needs-gated ones included."""
    if block.language == "python":
        compile(block.code, block.name, "exec")
    else:
        result = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True, text=True)
        assert result.returncode == 0, f"{block.name}: bash -n says\n{result.stderr}"


# ---------------------------------------------------------------------------------------------------- running


DRIVER = '''\
"""Runs one markdown file's selected blocks in order (written by tests/test_docs_snippets.py)."""
import json, os, runpy, subprocess, sys, time, traceback

def main():
    plan = json.load(open(sys.argv[1]))
    results = {}
    for block in plan["blocks"]:
        print(f"\\n===== {block['name']} ({block['language']}) =====", flush=True)
        start = time.monotonic()
        try:
            if block["language"] == "python":
                runpy.run_path(block["file"], run_name="__main__")
                status, message = "ok", ""
            else:
                done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]])
                status = "ok" if done.returncode == 0 else "error"
                message = f"bash exited with status {done.returncode}"
        except BaseException as error:  # noqa: BLE001  (SystemExit included: a block must not exit)
            status, message = "error", "".join(traceback.format_exception(error))
            print(message, file=sys.stderr, flush=True)
        results[block["name"]] = {"status": status, "message": message, "seconds": round(time.monotonic() - start, 1)}
        sys.stdout.flush()
        sys.stderr.flush()
        with open(plan["results"], "w") as out:
            json.dump(results, out)

if __name__ == "__main__":
    main()
'''

PIP_CHECKER = '''\
"""pip for the docs' snippets: installs nothing; exits 1 unless what the line asks for is installed here."""
import importlib.metadata as md, json, os, re, sys, tomllib
from packaging.requirements import Requirement

root = os.environ["STRUCTATTN_DOCS_REPO"]
args = [a for a in sys.argv[1:] if a not in ("-q", "--quiet", "-U", "--upgrade")]
if not args or args[0] != "install":
    sys.exit(f"pip checker: only 'pip install ...' is understood, got {sys.argv[1:]}")
problems, wanted, k = [], [], 1
while k < len(args):
    if args[k] == "-e":
        spec = args[k + 1]
        k += 2
        path, _, extras = re.fullmatch(r"([^\\[]*)(\\[(.*)\\])?", spec).group(1, 2, 3)
        if os.path.realpath(path) != os.path.realpath(os.getcwd()):
            problems.append(f"-e {spec}: only the repository root ('.') is checked")
        direct = md.distribution("structattn").read_text("direct_url.json") or "{}"
        if not json.loads(direct).get("dir_info", {}).get("editable"):
            problems.append("structattn is not installed editable (pip install -e)")
        declared = tomllib.load(open(os.path.join(root, "pyproject.toml"), "rb"))["project"]
        wanted += declared["dependencies"]
        for extra in (extras or "").split(","):
            if extra and extra not in declared["optional-dependencies"]:
                problems.append(f"extra [{extra}] is not in pyproject.toml")
            wanted += declared["optional-dependencies"].get(extra, [])
    else:
        wanted.append(args[k])
        k += 1
for text in wanted:
    requirement = Requirement(text)
    if requirement.marker and not requirement.marker.evaluate():
        continue
    try:
        version = md.version(requirement.name)
    except md.PackageNotFoundError:
        problems.append(f"{text}: not installed")
        continue
    if not requirement.specifier.contains(version, prereleases=True):
        problems.append(f"{text}: {version} installed")
if problems:
    sys.exit("pip checker: this environment does not match the install line:\\n  " + "\\n  ".join(problems))
print(f"pip checker: {len(wanted)} requirements of {' '.join(sys.argv[1:])} are installed here")
'''


def _workdir(base: Path) -> Path:
    work = base / "work"
    work.mkdir()
    for name in LINKED:
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    return work


def _environment(base: Path) -> dict[str, str]:
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "pip").write_text(f"#!{sys.executable}\n{PIP_CHECKER}")
    (bin_dir / "pip").chmod(0o755)
    for tool in ("python", "python3"):
        (bin_dir / tool).symlink_to(sys.executable)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "STRUCTATTN_DOCS_REPO": str(ROOT), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def run_doc(doc: str, blocks: list[Block], base: Path, timeout: int) -> tuple[dict, str]:
    """Run ``blocks`` (of ``doc``, in order) in one process; per-block results and the combined output."""
    work, scripts = _workdir(base), base / "blocks"
    scripts.mkdir()
    plan = {"results": str(base / "results.json"), "blocks": []}
    for block in blocks:
        entry = {"name": block.name, "language": block.language, "code": block.code}
        if block.language == "python":  # blank lines first, so tracebacks give the markdown file's line numbers
            entry["file"] = str(scripts / f"{Path(doc).name}-L{block.line}.py")
            Path(entry["file"]).write_text("\n" * block.line + block.code, encoding="utf-8")
        plan["blocks"].append(entry)
    (base / "plan.json").write_text(json.dumps(plan))
    (scripts / "driver.py").write_text(DRIVER)
    log = base / "output.txt"
    with open(log, "w") as out:  # a session of its own, so a timeout ends the blocks' child processes too
        driver = subprocess.Popen([sys.executable, str(scripts / "driver.py"), str(base / "plan.json")], cwd=work,
                                  env=_environment(base), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            driver.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
            out.write(f"\n(timed out after {timeout} s)\n")
    output = log.read_text(errors="replace")
    results = json.loads((base / "results.json").read_text()) if (base / "results.json").exists() else {}
    return results, output


@pytest.fixture(scope="session")
def doc_runs(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """``get(doc, slow)``: the results of running a doc's fast blocks, plus (``slow=True``) those of its slow
    blocks that this session selected (``-m slow -k 'README.md:305'`` runs that one with the fast ones), once."""
    cache: dict[tuple[str, bool], tuple[dict, str]] = {}
    selected = {item.callspec.params["block"].name for item in request.session.items
                if getattr(item, "originalname", "") == "test_block_runs" and hasattr(item, "callspec")}

    def get(doc: str, slow: bool) -> tuple[dict, str]:
        if (doc, slow) not in cache:
            chosen = [b for b in RUNNABLE if b.doc == doc and b.no_run is None and not missing_needs(b)
                      and (b.slow is None or (slow and b.name in selected))]
            base = tmp_path_factory.mktemp(re.sub(r"\W", "_", doc) + ("_all" if slow else "_fast"))
            cache[doc, slow] = run_doc(doc, chosen, base, SLOW_TIMEOUT_S if slow else FAST_TIMEOUT_S)
        return cache[doc, slow]

    return get


def _section(output: str, block: Block) -> str:
    """The part of the combined output that ``block`` printed (its last 6000 characters)."""
    start = output.find(f"===== {block.name} (")
    if start < 0:
        return output[-6000:]
    end = output.find("\n===== ", start + 1)
    return output[start:end if end > 0 else None][-6000:]


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, marks=[pytest.mark.slow] if b.slow is not None else [], id=f"{b.name}-{b.language}")
     for b in RUNNABLE],
)
def test_block_runs(block: Block, doc_runs, request: pytest.FixtureRequest) -> None:
    """The block runs as printed after the earlier runnable blocks of its file."""
    if block.no_run is not None:
        pytest.skip(f"{block.name}: marked no-run: {block.no_run}")
    missing = missing_needs(block)
    if missing:
        pytest.skip(f"{block.name}: needs {', '.join(missing)}")
    if block.slow is not None and not asked_for_slow(request.config):
        pytest.skip(f"{block.name}: slow block ({block.slow or 'marked slow'}): select with -m slow")
    results, output = doc_runs(block.doc, block.slow is not None or asked_for_slow(request.config))
    result = results.get(block.name)
    if result is None:
        pytest.fail(f"{block.name} was not reached (an earlier block hung or the run timed out):\n{output[-6000:]}")
    assert result["status"] == "ok", f"{block.name} failed after {result['seconds']} s:\n{_section(output, block)}"
