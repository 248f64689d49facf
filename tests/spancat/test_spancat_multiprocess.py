"""`nlp.pipe(texts, n_process=2)` with a sciner pipeline and torch's DEFAULT threads.

The suite's conftest sets torch.set_num_threads(1), which hides the fork/OpenMP hang, so
the pipeline runs in a fresh interpreter with the thread settings a user would have, in
its own process group, killed (workers included) after a timeout.
"""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from spancat_helpers import make_examples, make_nlp

from spacy_sciner import multiprocess

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import spacy, torch

    # The default thread count, but at least 2 so that the parent starts a real OpenMP
    # pool even on a 1-core machine (there is no pool to inherit with 1 thread).
    torch.set_num_threads(max(2, torch.get_num_threads()))
    model_dir, out_path = sys.argv[1], sys.argv[2]
    nlp = spacy.load(model_dir)
    texts = ["the support vector machine beats neural nets in the penn treebank corpus",
             "we use the penn treebank corpus", "bleu measures translation quality"] * 4

    def run(n_process):
        rows = []
        for doc in nlp.pipe(texts, batch_size=2, n_process=n_process):
            group = doc.spans["sc"]
            rows.append([[s.start, s.end, s.label_, float(score)]
                         for s, score in zip(group, group.attrs["scores"])])
        return rows

    one = run(1)  # in the parent first: starts torch's OpenMP pool before the fork
    print("n_process=1 done", file=sys.stderr, flush=True)
    two = run(2)
    with open(out_path, "w") as f:
        json.dump({"one": one, "two": two, "threads": torch.get_num_threads()}, f)
    """
)


@pytest.fixture(scope="module")
def sciner_model_dir(tiny_bert_dir, tmp_path_factory):
    """A saved transformer + sciner_spancat pipeline that outputs every span (threshold 0)."""
    from spacy.util import fix_random_seed

    nlp = make_nlp(tiny_bert_dir, threshold=0.0, max_span_length=3)
    fix_random_seed(0)
    nlp.initialize(lambda: make_examples(nlp))
    path = tmp_path_factory.mktemp("mp-model") / "model"
    nlp.to_disk(path)
    return path


def run_isolated(args, timeout):
    """Run `args` in a new session; on timeout kill the whole group (the workers too)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", multiprocess.TOKENIZERS_ENV)}
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"nlp.pipe(n_process=2) hung (killed after {timeout}s); stderr:\n{err[-3000:]}")
    return proc.returncode, out, err


def test_pipe_n_process_2_default_threads(sciner_model_dir, tmp_path):
    out_path = tmp_path / "out.json"
    rc, _, err = run_isolated([sys.executable, "-c", SCRIPT, str(sciner_model_dir), str(out_path)], timeout=240)
    assert rc == 0, err[-3000:]
    result = json.loads(out_path.read_text())
    assert result["threads"] >= 2  # the parent kept its threads; only the workers use 1
    one, two = result["one"], result["two"]
    assert len(two) == len(one) == 12 and all(one)
    for doc_one, doc_two in zip(one, two):
        assert [row[:3] for row in doc_two] == [row[:3] for row in doc_one]
        assert [row[3] for row in doc_two] == pytest.approx([row[3] for row in doc_one], abs=1e-5)
    # TOKENIZERS_PARALLELISM was unset: set around the fork, so no warning per worker.
    assert "The current process just got forked" not in err


def test_fork_guard_env_handling(monkeypatch):
    """The before-fork hook sets TOKENIZERS_PARALLELISM only if unset, and the parent gets
    its environment back; an explicit user value is never touched."""
    monkeypatch.delenv(multiprocess.TOKENIZERS_ENV, raising=False)
    multiprocess._before_fork()
    assert os.environ[multiprocess.TOKENIZERS_ENV] == "false"
    multiprocess._after_fork_in_parent()
    assert multiprocess.TOKENIZERS_ENV not in os.environ
    monkeypatch.setenv(multiprocess.TOKENIZERS_ENV, "true")
    multiprocess._before_fork()
    multiprocess._after_fork_in_parent()
    assert os.environ[multiprocess.TOKENIZERS_ENV] == "true"


def test_fork_guard_installed_once():
    multiprocess.install_fork_guard()
    assert multiprocess.install_fork_guard() is False


def test_forked_worker_uses_one_blas_thread():
    """numpy's BLAS runs sciner_spancat's matrix products (ops.py): a forked worker limits
    it to one thread, where the parent keeps its own setting."""
    code = textwrap.dedent(
        """
        import os, numpy
        from threadpoolctl import threadpool_info, threadpool_limits
        from spacy_sciner.ops import use_numpy_blas
        from thinc.api import Linear

        threadpool_limits(2, user_api="blas")  # as on a machine with 2+ cores
        use_numpy_blas(Linear(2, 2))  # installs the fork guard
        def blas_threads():
            return sorted({i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"})
        numpy.ones((4, 4)) @ numpy.ones((4, 4))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, repr(blas_threads()).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        print("child", os.read(r, 100).decode(), "parent", blas_threads())
        """
    )
    rc, out, err = run_isolated([sys.executable, "-c", code], timeout=120)
    assert rc == 0, err[-3000:]
    assert out.strip() == "child [1] parent [2]"
