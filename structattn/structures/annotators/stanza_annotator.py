"""Dependency parses of raw (or pretokenised) text with a stanza pipeline."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from structattn.structures.annotators.base import Annotator, register_annotator
from structattn.structures.annotators.consistency import check_alignment
from structattn.structures.sentence import Sentence


@register_annotator("stanza")
class StanzaAnnotator(Annotator):
    """Tokenise, tag and parse texts with stanza (Universal Dependencies labels, ``label_scheme="UD"``).

    The pipeline is built on first use, from models already in the stanza resources directory
    (``model_dir``, else ``$STANZA_RESOURCES_DIR``, else ``~/stanza_resources``); it never downloads. Before
    building it, :meth:`check_models` resolves the needed model files from ``resources.json`` with stanza's
    own rules and raises a :class:`ValueError` that lists the missing files and gives the one command that
    downloads them. stanza output becomes :class:`Sentence` s through
    :func:`structattn.structures.readers.stanza_io.from_stanza` (multi-word tokens kept in ``multiword``).

    Args:
        lang: language code.
        processors: comma-separated stanza processors; must include ``depparse`` for heads.
        pretokenized: texts are whitespace-separated tokens of one sentence each (no stanza tokenizer); the
            parsed words are checked against those tokens.
        model_dir: the stanza resources directory.
        package: stanza package name (``"default"``).
        use_gpu: run on a GPU when one is available.
    """

    loaded = ("_pipeline",)

    def __init__(
        self,
        lang: str = "en",
        processors: str = "tokenize,pos,lemma,depparse",
        pretokenized: bool = False,
        model_dir: str | Path | None = None,
        package: str = "default",
        use_gpu: bool = False,
    ) -> None:
        if "depparse" not in [p.strip() for p in processors.split(",")]:
            raise ValueError(f"stanza: processors {processors!r} lack 'depparse'; no heads would be produced")
        self.lang, self.processors, self.pretokenized = lang, processors, pretokenized
        self.package, self.use_gpu = package, use_gpu
        self.model_dir = Path(model_dir).expanduser() if model_dir is not None else None
        self._pipeline: Any = None
        self._options: dict[str, Any] | None = None

    def resources_dir(self) -> Path:
        """The stanza resources directory models are read from."""
        if self.model_dir is not None:
            return self.model_dir
        from stanza.resources.common import DEFAULT_MODEL_DIR

        return Path(DEFAULT_MODEL_DIR)

    def download_command(self) -> str:
        """The one command that downloads the models this annotator needs."""
        args = [repr(self.lang)]
        if self.model_dir is not None:
            args.append(f"model_dir={str(self.model_dir)!r}")
        if self.package != "default":
            args.append(f"package={self.package!r}")
        args.append(f"processors={self.processors!r}")
        return f'python -c "import stanza; stanza.download({", ".join(args)})"'

    def model_files(self) -> list[Path]:
        """Model files (``.pt``) the pipeline loads, resolved from ``resources.json`` by stanza's rules.

        Raises:
            ValueError: no ``resources.json``, or a language / processor it does not know.
        """
        from stanza.pipeline.core import filter_variants
        from stanza.resources.common import (
            add_dependencies,
            flatten_processor_list,
            maintain_processor_list,
            process_pipeline_parameters,
        )

        root = self.resources_dir()
        resources_json = root / "resources.json"
        if not resources_json.is_file():
            raise self._missing(f"there is no {resources_json}")
        resources = json.loads(resources_json.read_text(encoding="utf-8"))
        lang, _, package, processors = process_pipeline_parameters(self.lang, str(root), self.package, self.processors)
        lang = resources.get(lang, {}).get("alias", lang)
        if lang not in resources:
            raise ValueError(f"stanza: language {self.lang!r} is not in {resources_json}")
        stanza_log = logging.getLogger("stanza")
        level = stanza_log.level
        stanza_log.setLevel(logging.ERROR)  # "expects mwt, which has been added" is stanza's routine, not news
        try:
            load_list = maintain_processor_list(resources, lang, package, processors, maybe_add_mwt=not self.pretokenized)
            load_list = add_dependencies(resources, lang, load_list)
        finally:
            stanza_log.setLevel(level)
        needed = [(p, pkg) for p, pkg in flatten_processor_list(filter_variants(load_list)) if p in resources[lang]]
        return [root / lang / processor / f"{pkg}.pt" for processor, pkg in sorted(needed)]

    def check_models(self) -> list[Path]:
        """The model files, after checking that every one exists (no network is touched)."""
        files = self.model_files()
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise self._missing(f"missing model file(s): {', '.join(str(f) for f in missing)}")
        return files

    def _missing(self, what: str) -> ValueError:
        return ValueError(
            f"stanza models for lang={self.lang!r}, processors={self.processors!r} are not available ({what}); "
            f"download them once with: {self.download_command()}"
        )

    @property
    def pipeline(self) -> Any:
        """The stanza pipeline, built on first use (after :meth:`check_models`)."""
        if self._pipeline is None:
            self.check_models()
            import stanza

            self._pipeline = stanza.Pipeline(
                self.lang, dir=str(self.resources_dir()), processors=self.processors, package=self.package,
                tokenize_pretokenized=self.pretokenized, download_method=None, use_gpu=self.use_gpu,
                logging_level="WARN",
            )
        return self._pipeline

    def options(self) -> dict[str, Any]:
        if self._options is None:
            import stanza

            files = self.check_models()
            self._options = {
                "stanza": stanza.__version__, "lang": self.lang, "processors": self.processors,
                "package": self.package, "pretokenized": self.pretokenized,
                # a re-downloaded or updated model file changes the key (never a stale hit)
                "models": [[str(f.relative_to(self.resources_dir())), f.stat().st_size, f.stat().st_mtime_ns] for f in files],
            }
        return self._options

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]:
        docs = self.pipeline.bulk_process(list(texts))
        return [self.convert(doc, text) for doc, text in zip(docs, texts)]

    def convert(self, doc: Any, text: str | None = None) -> list[Sentence]:
        """Sentences of one stanza ``Document``; with ``pretokenized`` the words must equal ``text.split()``."""
        from structattn.structures.readers import from_stanza

        sentences = from_stanza(doc)
        if self.pretokenized and text is not None:
            check_alignment(Sentence([w for s in sentences for w in s.words], id=text[:40]), text.split())
        return sentences
