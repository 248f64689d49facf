"""In-domain static vectors for the CNN tok2vec: floret trained on unlabeled domain text.

spaCy's stock CPU pipelines reach their best accuracy with static vectors; a general-domain
table (en_core_web_lg) knows few of the terms of a cancer sub-field. floret (fastText with
subword hashing into one compact table, spaCy's own vectors format since v3.2) trained on the
domain's unlabeled text gives every token a vector, rare and unseen words included, from
its character n-grams. The result is a spaCy pipeline folder holding only the vectors, for
``--paths.vectors`` with ``include_static_vectors = true`` in the tok2vec's MultiHashEmbed.

Steps: ``write_tokenized`` (the nlp's own tokenizer, so that training and inference see the
same tokens) -> ``train_floret`` -> ``floret_to_spacy``; ``sciner train-vectors`` runs all three.
"""
import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence

import spacy

from ..mining.text import ReadStats, read_documents


class VectorsError(Exception):
    """Bad vectors settings or input, reported by the CLI in one line."""


@dataclass
class FloretSettings:
    """floret's training settings; defaults follow spaCy's floret example projects.

    ``hash_count`` 2 and ``bucket`` 50,000 rows keep the table small (50k x dim) while every
    word and subword still maps to two rows; ``minn``/``maxn`` 4..5 are the character n-gram
    lengths; ``threads`` 1 makes training deterministic (floret's Python API takes no seed:
    its random generator starts from a fixed seed per thread, and hogwild updates race when
    several threads run).
    """

    dim: int = 300
    epochs: int = 5
    min_count: int = 5
    minn: int = 4
    maxn: int = 5
    hash_count: int = 2
    bucket: int = 50000
    model: str = "cbow"
    threads: int = 1

    def check(self) -> None:
        """Raise VectorsError for settings floret would reject or crash on."""
        if self.dim < 1 or self.epochs < 1 or self.bucket < 1 or self.threads < 1:
            raise VectorsError("dim, epochs, bucket and threads must be at least 1")
        if not 1 <= self.hash_count <= 4:
            raise VectorsError(f"hash_count must be 1..4 (floret's limit), not {self.hash_count}")
        if not 1 <= self.minn <= self.maxn:
            raise VectorsError(f"need 1 <= minn <= maxn, got minn {self.minn}, maxn {self.maxn}")
        if self.model not in ("cbow", "skipgram"):
            raise VectorsError(f"model must be 'cbow' or 'skipgram', not '{self.model}'")


def write_tokenized(
    paths: Sequence[str], out_file: Path, *, lang: str = "en", limit: int = 0, stats: Optional[ReadStats] = None
) -> Dict[str, int]:
    """Write one line of space-separated tokens per input line (whitespace tokens dropped).

    paths (Sequence[str]): Text files, one sentence or document per line (as for ``mine``).
    out_file (Path): The tokenized text for floret.
    lang (str): Language of the tokenizer (``spacy.blank(lang)``).
    limit (int): Stop after this many non-empty lines; 0 for all.
    stats (Optional[ReadStats]): Filled with the reader's repair/skip counts.
    RETURNS (Dict[str, int]): ``{"lines": ..., "tokens": ...}`` written.
    """
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise VectorsError(f"text file not found: {', '.join(missing)}")
    nlp = spacy.blank(lang)
    texts = (text for doc in read_documents(paths, stats=stats) for _, _, text in doc)
    if limit:
        texts = (t for i, t in zip(range(limit), texts))
    lines = tokens = 0
    with open(out_file, "w", encoding="utf8") as file_:
        for doc in nlp.tokenizer.pipe(texts, batch_size=1000):
            words = [t.text for t in doc if not t.is_space]
            if words:
                file_.write(" ".join(words) + "\n")
                lines += 1
                tokens += len(words)
    return {"lines": lines, "tokens": tokens}


def train_floret(text_file: Path, vectors_file: Path, settings: FloretSettings) -> int:
    """Train floret vectors on tokenized text and save them in floret's text format.

    RETURNS (int): Words in floret's vocabulary (those seen ``min_count`` times).
    """
    try:
        import floret
    except ImportError:
        raise VectorsError("floret is not installed: pip install 'spacy-sciner[vectors]' (or floret>=0.10.5)") from None
    settings.check()
    model = floret.train_unsupervised(
        str(text_file), model=settings.model, mode="floret", dim=settings.dim, epoch=settings.epochs,
        minCount=settings.min_count, minn=settings.minn, maxn=settings.maxn, hashCount=settings.hash_count,
        bucket=settings.bucket, thread=settings.threads, verbose=0,
    )
    model.save_floret_vectors(str(vectors_file))
    return len(model.words)


def floret_to_spacy(vectors_file: Path, output_dir: Path, *, lang: str = "en") -> spacy.Language:
    """Load floret vectors into a blank pipeline and save it (what ``spacy init vectors
    --mode floret`` does), for ``--paths.vectors``."""
    from spacy.training.initialize import convert_vectors

    nlp = spacy.blank(lang)
    convert_vectors(nlp, vectors_file, truncate=0, prune=-1, mode="floret")
    nlp.to_disk(output_dir)
    return nlp


def train_vectors(
    paths: Sequence[str], output_dir: Path, settings: FloretSettings, *, lang: str = "en", limit: int = 0
) -> Dict[str, object]:
    """Tokenize, train floret and write a vectors-only spaCy pipeline to ``output_dir``.

    The pipeline is written next to ``output_dir`` and moved into place at the end, so an
    interrupted run never leaves a half-written folder that looks finished.
    RETURNS (Dict[str, object]): Counts, settings and seconds, also written to
        ``output_dir/vectors_log.json``.
    """
    settings.check()
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    stats = ReadStats()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=output_dir.parent, prefix=f".{output_dir.name}.") as tmp:
        tmp = Path(tmp)
        counts = write_tokenized(paths, tmp / "tokens.txt", lang=lang, limit=limit, stats=stats)
        if counts["tokens"] == 0:
            raise VectorsError(f"no tokens in {', '.join(paths)}: nothing to train vectors on")
        tokenized_s = time.perf_counter() - start
        vocab = train_floret(tmp / "tokens.txt", tmp / "vectors.floret", settings)
        nlp = floret_to_spacy(tmp / "vectors.floret", tmp / "pipeline", lang=lang)
        log = {**counts, "floret_vocab": vocab, "table_shape": list(nlp.vocab.vectors.shape),
               "settings": asdict(settings), "read": stats.as_dict(), "tokenize_s": round(tokenized_s, 1),
               "total_s": round(time.perf_counter() - start, 1)}
        (tmp / "pipeline" / "vectors_log.json").write_text(json.dumps(log, indent=2))
        if output_dir.exists():
            shutil.rmtree(output_dir)
        (tmp / "pipeline").rename(output_dir)
    return log

