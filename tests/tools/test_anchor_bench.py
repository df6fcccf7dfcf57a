"""bench/anchor.py: the plain PyTorch anchor is tagnn's model (same parameters, same logits), and the bench runs end to
end on the CPU, writing both loops' examples/s, their ratio and the host time per batch (tiny sizes: it checks the
script, not the speeds)."""

import pytest
import torch

from bench import anchor
from bench.loop import build

TINY = ["dataset.num_train=48", "trainer.batch_size=16"]


@pytest.fixture(scope="module")
def built():
    return build(anchor.OVERRIDES + TINY, "cpu")


def test_the_plain_model_has_tagnns_parameters_and_computes_its_logits(built):
    cfg, devices, data, training, _ = built
    core = training.core
    model = anchor.PlainTransformer(cfg.model, len(data.vocab), data.num_classes, max_len=100)
    assert anchor.num_params(model) == anchor.num_params(core) == training.num_params  # equal: nothing to explain
    plain = anchor.make_plain(cfg, data, core, devices[0], compiled=False, compile_mode=None)
    core.eval(), plain.model.eval()
    indices = list(range(16))
    g, y = data.train_loader.make(indices)
    tok, pad, labels = plain.split.batch(indices)
    assert torch.equal(labels, y) and int((~pad).sum()) == g.num_nodes()  # the same examples, the same tokens
    assert torch.allclose(plain.model(tok, pad), core(g), atol=1e-5)


def test_the_bench_writes_both_loops_examples_per_second_and_their_ratio(tmp_path):
    args = ["--device", "cpu", "--epochs", "1", "--num-train", "48", "--batch-sizes", "16", "--threads", "1"]
    assert anchor.main(args + ["--batch-limit", "3", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "anchor.md").read_text()
    assert "`python -m bench.anchor --device cpu --epochs 1" in table and "Load average (1 min)" in table
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| 16 | fp32 | eager |")]
    assert len(rows) == 1
    tagnn, plain, ratio = (float(x.strip(" |").replace(",", "")) for x in rows[0][3:6])
    assert tagnn > 0 and plain > 0 and ratio == pytest.approx(tagnn / plain, rel=0.02, abs=0.01)
    batch = [line.split(" | ") for line in table.splitlines() if line.startswith("| 16 | ") and "graphs" in line]
    assert len(batch) == 1 and float(batch[0][1]) > 0 and float(batch[0][4]) > 0  # tagnn's and plain's ms
    p = next(line for line in table.splitlines() if line.startswith("Parameters:"))
    assert p.endswith("(equal).")
    with pytest.raises(SystemExit, match="--machine 'a b'"):  # a bad folder name, before any timing
        anchor.main(args + ["--machine", "a b"])


def test_the_compiled_loops_run_and_have_their_rows(tmp_path, monkeypatch):
    """``--compile`` end to end, traced with aot_eager (no code generated: seconds, not minutes): tagnn's compiled
    step (``trainer.compile``) against the compiled plain model, no row failed."""
    from engine import compiled

    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")
    monkeypatch.setattr(anchor, "BACKEND", "aot_eager")
    args = ["--device", "cpu", "--epochs", "1", "--num-train", "32", "--batch-sizes", "16", "--threads", "1"]
    assert anchor.main(args + ["--compile", "--batch-limit", "2", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "anchor.md").read_text()
    assert "failed" not in table
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| 16 | fp32 | ")]
    assert [r[2] for r in rows[:2]] == ["eager", "compiled"]  # tagnn compiled against plain compiled
    assert all(float(r[5].strip(" |")) > 0 for r in rows[:2])
