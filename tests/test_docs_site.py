"""The docs site (docs/README.md): it builds with warnings as errors, its API reference has an entry for every
public name, the snippet test runs the code of every page it reads, and (slow, where Chromium is installed) its
landing page, a guide and an API page render in a real browser with their titles, code blocks, images and links.

The site is built once per session into a temporary folder (about 20 s on 2 cores); every test here skips, with
the reason printed, where the ``[docs]`` extra is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import structattn
from tests.test_docs_snippets import DOCS, parse_blocks

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "docs"
DOCS_EXTRA = ("sphinx", "furo", "myst_parser")
REGISTRIES = {"structattn.attention": "ATTENTION", "structattn.structures": "PROVIDERS", "structattn.tasks": "TASKS"}
PROBE_MODULES = ("structattn.probes.structural", "structattn.probes.stacking", "structattn.probes.tree_induction")
INCLUDE = re.compile(r"^:::\{include\}\s+(\S+)\s*$", re.MULTILINE)


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site (``html/``, ``doctrees/``), built as .ci/run builds it: -W --keep-going."""
    missing = [name for name in DOCS_EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the [docs] extra is not installed (missing {', '.join(missing)}): pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d",
                           str(out / "doctrees"), str(SOURCE), str(out / "html")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, f"the site does not build with -W:\n{done.stdout[-4000:]}\n{done.stderr[-8000:]}"
    return out


def documented_names(site: Path) -> set[str]:
    """Every object name in the built site's inventory (objects.inv)."""
    from sphinx.util.inventory import InventoryFile

    with open(site / "html" / "objects.inv", "rb") as stream:
        inventory = InventoryFile.load(stream, "", lambda base, uri: uri)
    data = inventory.data if hasattr(inventory, "data") else inventory  # Sphinx >= 8.2: an _Inventory
    return {name for entries in data.values() for name in entries}


def public_packages() -> list[str]:
    """structattn and every subpackage of it that declares ``__all__``."""
    names = ["structattn"] + [f"structattn.{info.name}" for info in pkgutil.iter_modules(structattn.__path__)
                              if info.ispkg]
    return [name for name in names if hasattr(importlib.import_module(name), "__all__")]


def site_pages(site: Path) -> list[Path]:
    """The Markdown sources the build read (one doctree each), as paths."""
    doctrees = site / "doctrees"
    return sorted(SOURCE / path.relative_to(doctrees).with_suffix(".md") for path in doctrees.rglob("*.doctree"))


def test_site_builds(site: Path) -> None:
    """The fixture built it with -W; the pages the toctrees promise are there."""
    for page in ("index", "get_started", "changelog", "reference/index", "reference/attention", "results"):
        assert (site / "html" / f"{page}.html").is_file(), f"{page}.html is missing from the built site"


def test_every_public_name_has_a_reference_entry(site: Path) -> None:
    """Every name of every package's ``__all__``, every registered variant, provider and task, and the probes'
    public functions and classes have an entry in the API reference."""
    documented = documented_names(site)
    wanted = [f"{package}.{name}" for package in public_packages()
              for name in importlib.import_module(package).__all__]
    for package, attribute in REGISTRIES.items():
        registry = getattr(importlib.import_module(package), attribute)
        wanted += [f"{cls.__module__}.{cls.__qualname__}" for _, cls in registry.items()]
    for module_name in PROBE_MODULES:
        module = importlib.import_module(module_name)
        wanted += [f"{module_name}.{name}" for name, value in vars(module).items()
                   if not name.startswith("_") and getattr(value, "__module__", None) == module_name
                   and callable(value)]
    assert len(public_packages()) >= 10, public_packages()
    missing = [name for name in wanted if name not in documented]
    assert not missing, f"{len(missing)} public names have no entry in docs/reference: {missing}"


def test_snippet_test_covers_every_site_page(site: Path) -> None:
    """tests/test_docs_snippets.py runs the code blocks of every page the site reads, and of every file a page
    includes (the landing page includes README.md)."""
    pages = site_pages(site)
    assert SOURCE / "index.md" in pages and SOURCE / "reference" / "attention.md" in pages
    included = [(page.parent / target).resolve() for page in pages
                for target in INCLUDE.findall(page.read_text(encoding="utf-8"))]
    assert ROOT / "README.md" in included
    uncovered = [path.relative_to(ROOT).as_posix() for path in pages + included if path not in DOCS]
    assert not uncovered, f"pages of the site whose code blocks tests/test_docs_snippets.py does not run: {uncovered}"


def test_every_docs_page_is_on_the_site(site: Path) -> None:
    """No Markdown file under docs/ is left off the site, except docs/README.md (the maintainers' note)."""
    pages = set(site_pages(site))
    sources = {path for path in SOURCE.rglob("*.md") if "_build" not in path.parts}
    assert sources - pages == {SOURCE / "README.md"}, sorted(map(str, sources - pages))


# ---------------------------------------------------------------------------------------------------- browser

CHECK_SCRIPT = """<script>
window.addEventListener("load", () => {
  const article = document.querySelector("article") || document.body;
  const found = {
    title: document.title,
    h1: (article.querySelector("h1") || {textContent: ""}).textContent.replace("\\u00b6", "").trim(),
    code_blocks: article.querySelectorAll("div.highlight pre").length,
    signatures: [...article.querySelectorAll("dl.py > dt[id]")].map(dt => dt.id),
    images: [...document.images].map(img => ({src: img.currentSrc || img.src,
                                               ok: img.complete && img.naturalWidth > 0})),
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
  };
  const out = document.createElement("script");
  out.type = "application/json";
  out.id = "structattn-check";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>"""


def chromium() -> str | None:
    """Debian's chromium (or another Chromium-family browser) on PATH."""
    return next((path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))),
                None)


def run_browser(browser: str, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-extensions", "--virtual-time-budget=8000"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


def rendered(browser: str, page: Path) -> dict:
    """What the browser saw on ``page``: a copy of it beside it (same relative URLs) runs CHECK_SCRIPT on load."""
    probe = page.with_name(f"_check_{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK_SCRIPT + "</body>"), encoding="utf-8")
    done = run_browser(browser, "--dump-dom", probe.as_uri())
    match = re.search(r'<script type="application/json" id="structattn-check">(.*?)</script>', done.stdout, re.S)
    assert match, f"{page.name}: the browser returned no check result (exit {done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(match.group(1))


def broken_links(links: list[str], html: Path) -> list[str]:
    """Links to files of the site that do not exist, or to an #anchor that their page lacks (web links are not
    fetched: the tests run offline)."""
    broken = []
    for link in links:
        url = urlparse(link)
        if url.scheme != "file":
            continue
        target = Path(unquote(url.path))
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file() or html not in target.parents and target != html:
            broken.append(f"{link} (no such file in the site)")
        elif url.fragment and target.suffix == ".html":
            ids = re.findall(r'\bid="([^"]+)"', target.read_text(encoding="utf-8"))
            if unquote(url.fragment) not in ids:
                broken.append(f"{link} (no #{url.fragment} on {target.name})")
    return broken


def fence_count(path: Path) -> int:
    return len(parse_blocks(path, path.name))


@pytest.mark.slow
def test_pages_in_a_browser(site: Path, tmp_path: Path) -> None:
    """The landing page, a guide and an API page in headless Chromium: a screenshot each (non-blank), the page's
    title, as many highlighted code blocks as its source has fences (the API page: a rendered signature per
    public name and registered variant),
    every image loaded and every link of the site resolving."""
    browser = chromium()
    if browser is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    from matplotlib import image

    attention = importlib.import_module("structattn.attention")
    html = site / "html"
    pages = {
        "index.html": ("structattn", fence_count(ROOT / "README.md"), []),
        "get_started.html": ("Get started", fence_count(SOURCE / "get_started.md"), []),
        "reference/attention.html": ("structattn.attention: attention variants", None,  # docstrings' examples
                                     [f"structattn.attention.{name}" for name in attention.__all__]
                                     + [f"{cls.__module__}.{cls.__qualname__}" for _, cls in attention.ATTENTION.items()]),
    }
    problems = []
    for name, (title, code_blocks, entries) in pages.items():
        page = html / name
        shot = tmp_path / (name.replace("/", "_") + ".png")
        done = run_browser(browser, "--window-size=1280,1600", f"--screenshot={shot}", page.as_uri())
        assert shot.is_file(), f"{name}: no screenshot (exit {done.returncode}):\n{done.stderr[-3000:]}"
        pixels = image.imread(shot)
        if pixels.shape[:2] != (1600, 1280) or float(pixels[..., :3].std()) < 0.05:
            problems.append(f"{name}: the screenshot ({shot}) is blank or of the wrong size {pixels.shape}")
        seen = rendered(browser, page)
        if seen["h1"] != title or not seen["title"].startswith(title):
            problems.append(f"{name}: title {seen['title']!r}, heading {seen['h1']!r}; expected {title!r}")
        if code_blocks is not None and seen["code_blocks"] != code_blocks:
            problems.append(f"{name}: {seen['code_blocks']} highlighted code blocks, its source has {code_blocks}")
        missing = [entry for entry in entries if entry not in seen["signatures"]]
        if missing:
            problems.append(f"{name}: no rendered entry for {missing}")
        problems += [f"{name}: image {img['src']} did not load" for img in seen["images"] if not img["ok"]]
        if not seen["images"] and name == "index.html":
            problems.append("index.html: the README's figure is not on the landing page")
        problems += [f"{name}: broken link {link}" for link in broken_links(seen["links"], html)]
    assert not problems, "\n".join(problems)
