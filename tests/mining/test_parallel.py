import pytest

from spacy_sciner.mining import parallel
from spacy_sciner.mining.miner import MinerConfig, mine
from spacy_sciner.mining.parallel import LineBar, run_partitioned


class Count:
    """An accumulator that remembers the order of the batches it folded."""

    def __init__(self, lines=0, occurrences=0, batches=()):
        self.lines, self.occurrences, self.batches = lines, occurrences, list(batches)

    def merge(self, other):
        self.lines += other.lines
        self.batches += other.batches


def count_batch(batch, index):
    return Count(sum(len(doc) for doc in batch), 0, [index])


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "aux.txt"
    path.write_text("".join(f"line {i} of a random forest .\n" for i in range(50)))
    return str(path)


@pytest.mark.parametrize("n_process", [1, 2, 3])
def test_parts_hold_the_same_batches_in_input_order(corpus, n_process):
    parts, stats = run_partitioned([corpus], "line", 4, count_batch, Count, n_process,
                                   n_parts=3)
    assert [part.batches for part in parts] == [
        list(range(0, 13, 3)), list(range(1, 13, 3)), list(range(2, 13, 3))]
    assert sum(part.lines for part in parts) == stats.lines == 50


def test_without_fork_one_process_works_with_a_warning(corpus, monkeypatch):
    monkeypatch.setattr(parallel, "fork_available", lambda: False)
    monkeypatch.setattr(parallel.multiprocessing, "get_context", None)  # must not be used
    with pytest.warns(RuntimeWarning, match="using one process, the 'fork' start method"):
        parts, _ = run_partitioned([corpus], "line", 4, count_batch, Count, 2)
    assert [part.batches for part in parts] == [list(range(0, 13, 2)), list(range(1, 13, 2))]
    cfg = MinerConfig(min_count=2)
    with pytest.warns(RuntimeWarning, match="'fork' start method is not available"):
        table, report = mine([corpus], None, cfg, n_process=2, batch_lines=4, progress=False)
    assert report["lines"] == 50 and table.rows["random forest"].freq == 50


def test_line_bar_counts_lines_as_integers(capsys):
    bar = LineBar("mining")
    bar.refresh()
    bar.update(12345)
    bar.set_postfix_str("candidates=7")
    bar.close()
    text = capsys.readouterr().err
    assert "mining: 0 lines [" in text and "mining: 12,345 lines [" in text
    assert "candidates=7]" in text and "0.00" not in text and "k lines" not in text
