"""Label sources of ``sciner label-weak``: the type map and the typed dictionary.

Type map: a UTF-8 TSV. Lines starting with ``#`` and blank lines are ignored; the first
other line is the header ``file<TAB>label``; every further line names a gazetteer and its
label::

    # file                  label
    file                    label
    mesh-diseases.belns     Disease
    disease-ontology.belns  Disease
    my_terms.tsv            *

A relative file is resolved against ``gazetteer_dir`` (the ``--gazetteer-dir`` option;
default: the type map's own folder), after ``$VARIABLES`` are expanded. A file is a plain
term list (one term per line; of a line with TABs its first column), a BEL ``.belns``/``.belanno`` file (``name|code`` under
``[Values]``; read by ``TermDictionary.load_gazetteer``), or, with label ``*``, a
``term<TAB>label`` list whose second column is the label. Labels are non-empty and hold
no whitespace and no ``|``.

Priority: the rows of the type map in order (first = highest), after the labels of the
training data (``--train``: curated, in-domain) and before the mined candidates (label
``ENTITY``, lowest). Every (label, source) pair is one *entry*; its index is the source
tag of its terms in the ``TermDictionary`` (zero-padded, so that the sorted tag string
of a match lists its entries in priority order).
"""
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..mining.dictionary import LoadReport, TermDictionary

ENTITY = "ENTITY"  # label of the untyped mined candidates
TYPE_MAP_COLUMNS = ("file", "label")
FROM_FILE = "*"  # type-map label: take the label from the file's second column


class TypeMapError(ValueError):
    """A type map or typed list that cannot be used; the message names file and line."""


def check_label(label: str, where: str) -> str:
    """Return ``label`` or raise TypeMapError naming ``where`` (file:line)."""
    if not label:
        raise TypeMapError(f"{where}: empty label")
    if any(c.isspace() for c in label) or "|" in label:
        raise TypeMapError(f"{where}: label {label!r} holds whitespace or '|'")
    return label


@dataclass
class TypeMapRow:
    path: Path
    label: str  # a label, or FROM_FILE
    line_no: int


def read_type_map(path: Path, gazetteer_dir: Optional[Path] = None) -> List[TypeMapRow]:
    """Parse and check a type map (every file must exist) before anything is loaded.

    path (Path): The type map TSV.
    gazetteer_dir (Optional[Path]): Folder of relative file names (default: the map's).
    RETURNS (List[TypeMapRow]): The rows in priority order.
    """
    base = Path(gazetteer_dir) if gazetteer_dir is not None else Path(path).parent
    try:
        raw_lines = Path(path).read_bytes().split(b"\n")
    except OSError as err:
        raise TypeMapError(f"{path}: cannot read the type map ({err.strerror or err})")
    rows: List[TypeMapRow] = []
    header = None
    for line_no, raw in enumerate(raw_lines, start=1):
        where = f"{path}:{line_no}"
        try:
            line = raw.decode("utf8").rstrip("\r")
        except UnicodeDecodeError:
            raise TypeMapError(f"{where}: invalid UTF-8")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in line.split("\t")]
        if header is None:
            unknown = [f for f in fields if f not in TYPE_MAP_COLUMNS]
            if unknown or tuple(fields) != TYPE_MAP_COLUMNS:
                raise TypeMapError(f"{where}: header must be 'file<TAB>label', got "
                                   f"{fields} (unknown columns: {unknown or 'none'})")
            header = fields
            continue
        if len(fields) != 2:
            raise TypeMapError(f"{where}: expected 2 TAB-separated columns (file, label), "
                               f"got {len(fields)}")
        name, label = fields
        if label != FROM_FILE:
            check_label(label, where)
        file_path = Path(os.path.expandvars(name))
        if not file_path.is_absolute():
            file_path = base / file_path
        if not file_path.is_file():
            raise TypeMapError(f"{where}: gazetteer file not found: {file_path}")
        rows.append(TypeMapRow(file_path, label, line_no))
    if not rows:
        raise TypeMapError(f"{path}: the type map names no gazetteer file")
    return rows


@dataclass
class LabelSources:
    """A TermDictionary whose source tags are indices of (label, source) entries.

    case (str): Case policy of the dictionary ("smart": case-insensitive unless acronym).
    """

    case: str = "smart"
    entries: List[Tuple[str, str]] = field(default_factory=list)
    loading: Dict[str, Dict[str, object]] = field(default_factory=dict)

    def __post_init__(self):
        self.dictionary = TermDictionary(case=self.case)
        self._index: Dict[Tuple[str, str], int] = {}

    def tag(self, label: str, source: str) -> str:
        """The dictionary source tag of (label, source), created in priority order."""
        key = (label, source)
        if key not in self._index:
            self._index[key] = len(self.entries)
            self.entries.append(key)
        return f"{self._index[key]:05d}"

    def entries_of(self, tags: str) -> List[Tuple[str, str]]:
        """The (label, source) entries of a match's "00001|00004" tags, by priority."""
        return [self.entries[int(t)] for t in tags.split("|")]

    def add_terms(self, terms: Iterable[str], label: str, source: str) -> LoadReport:
        report = self.dictionary.add_many(terms, self.tag(label, source))
        self._note(source, report)
        return report

    def _note(self, source: str, report: LoadReport) -> None:
        counts = self.loading.setdefault(source, Counter())
        for key, value in report.as_dict().items():
            if key == "examples":
                counts.setdefault("examples", [])
                counts["examples"].extend(value[: 5 - len(counts["examples"])])
            else:
                counts[key] += value

    def add_type_map(self, rows: Sequence[TypeMapRow]) -> None:
        """Load the gazetteers of a type map, in its priority order."""
        for row in rows:
            source = row.path.name
            if row.label == FROM_FILE:
                self._note(source, self._load_typed_list(row.path, source))
            else:
                report = self.dictionary.load_gazetteer(str(row.path), self.tag(row.label, source))
                self._note(source, report)

    def _load_typed_list(self, path: Path, source: str) -> LoadReport:
        """A ``term<TAB>label`` list; a line without a valid label raises (file:line)."""
        report = LoadReport()
        with open(path, "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf8").rstrip("\r\n")
                except UnicodeDecodeError:
                    report.skip("malformed", str(path), line_no)
                    continue
                if not line.strip() or line.startswith("#"):
                    report.skip("blank", str(path), line_no)
                    continue
                fields = line.split("\t")
                if len(fields) != 2:
                    raise TypeMapError(f"{path}:{line_no}: expected 'term<TAB>label' "
                                       f"(label column '*' in the type map), got {line!r}")
                label = check_label(fields[1].strip(), f"{path}:{line_no}")
                # The dictionary's own per-line rules (blank, too short, stop word, no
                # letter, duplicate) apply, counted with this file's line numbers.
                self.dictionary._add_counted(fields[0].strip(), self.tag(label, source),
                                             report, str(path), line_no)
        return report

    def add_training_entities(self, spans: Iterable[Tuple[str, str]], source: str,
                              where: Optional[str] = None) -> int:
        """Gold (text, label) pairs; a text seen with several labels keeps its most
        frequent one (ties: the first seen). RETURNS (int): texts with several labels.
        ``where`` (default: ``source``) names the data in an error about a bad label."""
        votes: Dict[str, Counter] = defaultdict(Counter)
        for text, label in spans:
            votes[" ".join(text.split())][label] += 1
        by_label: Dict[str, List[str]] = defaultdict(list)
        for text, counts in votes.items():
            by_label[counts.most_common(1)[0][0]].append(text)
        for label in sorted(by_label):
            self.add_terms(by_label[label], check_label(label, where or source), source)
        multi = sum(len(counts) > 1 for counts in votes.values())
        self.loading.setdefault(source, Counter())["texts_with_several_labels"] = multi
        return multi

    def conflicting_terms(self) -> Tuple[int, List[str]]:
        """Terms listed with more than one label: their number and a few examples."""
        n, examples = 0, []
        for term, tags, _ in self.dictionary.to_list():
            labels = sorted({label for label, _ in self.entries_of(tags) if label != ENTITY})
            if len(labels) > 1:
                n += 1
                if len(examples) < 5:
                    examples.append(f"{term!r}: {'/'.join(labels)}")
        return n, examples

    def labels(self) -> List[str]:
        return sorted({label for label, _ in self.entries})
