"""``sciner mine`` and ``build-corpus`` write the same bytes whatever ``--n-process``."""
import random

import pytest
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.mining.candidates import CandidateTable

PHRASES = [f"{a} {b}" for a in ("neural", "random", "protein", "gene", "graph", "hidden")
           for b in ("network", "forest", "kinase", "model")]
# Half the phrases are known terms (the classifier's positives), half must be found.
KNOWN = PHRASES[::2]


def synthetic_lines(n_lines, seed=0):
    """Filler words with embedded phrases and an acronym definition now and then."""
    rng = random.Random(seed)
    filler = [f"w{i}" for i in range(400)] + ["the", "of", "and", "is", "a", "in"]
    for i in range(n_lines):
        words = [rng.choice(filler) for _ in range(rng.randint(6, 14))]
        for phrase in rng.sample(PHRASES, 2):
            pos = rng.randint(0, len(words))
            words[pos:pos] = phrase.split()
        if i % 7 == 0:
            words += ["support", "vector", "machine", "(", "SVM", ")"]
        yield " ".join(words) + " ."


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("determinism")
    (root / "aux.txt").write_text("\n".join(synthetic_lines(600)) + "\n", encoding="utf8")
    (root / "gazetteer.txt").write_text("\n".join(KNOWN) + "\n", encoding="utf8")
    return root


def mine(inputs, output, n_process, *extra):
    args = ["mine", str(inputs / "aux.txt"), "-o", str(output), "-g",
            str(inputs / "gazetteer.txt"), "--min-count", "3", "--max-ngrams", "4000",
            "--batch-lines", "20", "--n-process", str(n_process), "--no-progress", *extra]
    result = CliRunner().invoke(sciner_cli, args)
    assert result.exit_code == 0, result.output
    return output.read_bytes()


def test_mine_output_does_not_depend_on_n_process(inputs, tmp_path):
    one = mine(inputs, tmp_path / "one.tsv", 1)
    two = mine(inputs, tmp_path / "two.tsv", 2)
    with pytest.warns(RuntimeWarning, match="using 2 processes, one per part"):
        three = mine(inputs, tmp_path / "three.tsv", 3)
    assert one == two == three
    report = (tmp_path / "two.tsv.report.json").read_text()
    # The run exercised what used to depend on the partitioning.
    assert '"model": "logistic"' in report and '"pruned_below": 0' not in report
    table = CandidateTable.read(str(tmp_path / "one.tsv"))
    assert "phrase" in table.rows["neural forest"].sources  # an unknown phrase was found


def test_mine_with_the_same_seed_twice_gives_the_same_output(inputs, tmp_path):
    assert mine(inputs, tmp_path / "a.tsv", 2) == mine(inputs, tmp_path / "b.tsv", 2)


@pytest.mark.parametrize("suffix,mode", [(".jsonl", "top"), (".spacy", "random")])
def test_build_corpus_output_does_not_depend_on_n_process(inputs, tmp_path, suffix, mode):
    table = tmp_path / "candidates.tsv"
    mine(inputs, table, 1)
    outputs = []
    for n_process in (1, 2):
        output = tmp_path / f"pft{n_process}{suffix}"
        result = CliRunner().invoke(sciner_cli, [
            "build-corpus", str(inputs / "aux.txt"), "-c", str(table), "-o", str(output),
            "--n", "50", "--mode", mode, "--batch-lines", "20", "--n-process", str(n_process),
            "--no-progress"])
        assert result.exit_code == 0, result.output
        outputs.append(output.read_bytes())
    assert outputs[0] == outputs[1]
