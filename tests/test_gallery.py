"""scripts/gallery.py writes every figure of docs/gallery.md: a ``--quick`` run (the quickstart comparison shrunk
to 2 seeds, 6 steps and a width-16 model by gin overrides; about 10 s) into a temporary folder, then the committed
figures: each is on the page, and under the size limit."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def load_gallery():
    spec = importlib.util.spec_from_file_location("gallery_script", ROOT / "scripts" / "gallery.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_every_figure(tmp_path, capsys):
    gallery = load_gallery()
    assert gallery.main(["--quick", "--out", str(tmp_path)]) == 0
    for name in gallery.GALLERY:
        path = tmp_path / name
        assert path.is_file(), f"scripts/gallery.py --quick wrote no {name}"
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, f"{name}: {len(data)} bytes, not a drawn PNG"
        assert len(data) <= gallery.MAX_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(gallery.GALLERY)


def test_committed_figures_are_on_the_page_and_small():
    gallery = load_gallery()
    page = (ROOT / "docs" / "gallery.md").read_text(encoding="utf-8")
    for name in gallery.GALLERY:
        path = gallery.OUT / name
        assert path.is_file(), f"docs/figures/gallery/{name} is not committed (run python scripts/gallery.py)"
        assert path.stat().st_size <= gallery.MAX_BYTES, f"{name} is {path.stat().st_size:,} bytes"
        assert f"(figures/gallery/{name})" in page, f"docs/gallery.md does not show {name}"
