"""``trainer.compile``: the dense forward on bucketed shapes, compiled (engine/compiled.py).

Every synchronous model's dense forward is one graph for ``torch.compile(fullgraph=True)`` on the complete
graph and the tree; padding to a bucket leaves the real positions' outputs as the eager model computes them;
recompiles are bounded by the buckets; compiled (inductor) and eager agree in logits and gradients; and
``train.py trainer.compile=true`` trains. Tracing uses a counting backend (no code generated: fast);
only the agreement test and the run generate code (inductor, on the CPU: slow, so the models are tiny).
"""

import json
import logging

import dgl
import pytest
import torch
import torch._dynamo

from data import listops
from data.graphs import GraphConstruction
from engine import compiled
from engine.compiled import CompiledDense, dense_logits, padded_inputs
from engine.loop import make_optimizer, multi_tensor
from models.dense import bucket_length
from tests.conftest import compose_config
from tests.helpers.encoders import graph_encoder
from tests.models.test_dense import batch
from train import run

MODELS = ("transformer", "gat", "gcn", "sum", "mean", "max", "gin")  # the synchronous (encoder family) models
GRAPHS = ("complete", "tree")


def encoder(model, graph, readout="mean", **kw):
    torch.manual_seed(0)
    construction = GraphConstruction(name=graph, k=3, cls_id=2 if readout == "cls" else None)
    knobs = {"hidden_dim": 16, "num_layers": 2, "num_heads": 2, "impl": "dense", "readout": readout, **kw}
    return graph_encoder(20, 10, aggregator=model, construction=construction, **knobs), construction


class Counter:
    """A torch.compile backend that runs the traced graph as it is and counts the graphs it was given."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("graph", GRAPHS)
@pytest.mark.parametrize("model", MODELS)
def test_dense_forward_is_one_graph(model, graph):
    m, construction = encoder(model, graph)
    m.train()  # the step compiles the training forward (dropout on)
    args = padded_inputs(m, batch(construction))
    explained = torch._dynamo.explain(dense_logits)(m, *args)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    counter = Counter()  # and fullgraph=True, as CompiledDense compiles it, raises on none
    torch.compile(dense_logits, backend=counter, fullgraph=True, dynamic=False)(m, *args)
    assert counter.graphs == 1


@pytest.mark.parametrize(
    "model,graph,readout",
    [(m, g, "mean") for m in MODELS for g in GRAPHS] + [("transformer", g, r) for g in GRAPHS for r in ("root", "cls")],
)
def test_padding_to_a_bucket_keeps_the_real_outputs(model, graph, readout):
    """Eager, uncompiled: the padded forward's logits equal the model's own dense forward, whatever the pad."""
    m, construction = encoder(model, graph, readout)
    m.eval()
    g = batch(construction)
    largest = int(g.batch_num_nodes().max())
    with torch.no_grad():
        reference = m(g)
        for pad_to in (largest, bucket_length(largest), bucket_length(largest) + 37):
            tok, pos, valid, *rest = padded_inputs(m, g, pad_to)
            assert valid.shape == (g.batch_size, pad_to)
            out = dense_logits(m, tok, pos, valid, *rest)
            torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5, msg=f"padded to {pad_to}")


def test_buckets():
    assert [bucket_length(n) for n in (1, 16, 17, 100, 256)] == [16, 16, 32, 112, 256]
    assert [bucket_length(n) for n in (257, 300, 1000, 1025, 4000)] == [288, 320, 1024, 1152, 4096]
    for n in range(1, 5000):
        assert n <= bucket_length(n) <= max(n + 15, int(n * 1.125))
    assert len({bucket_length(n) for n in range(1, 4097)}) == 16 + 4 * 8  # 16 up to 256, then 8 per octave


def listops_batches(construction, sizes, seed=0):
    """DGL batches of ListOps graphs, ``sizes[i]`` graphs each, of lengths 1 to 100 tokens."""
    examples = list(listops.generate(sum(sizes), seed=seed, max_length=100, root_operator=True))
    examples.sort(key=lambda ex: len(ex["tokens"]))
    ids = {t: i + 3 for i, t in enumerate(listops.TOKENS)}
    graphs = [construction([ids[t] for t in ex["tokens"]], ex["heads"]) for ex in examples]
    batches, start = [], 0
    for size in sizes:
        batches.append(dgl.batch(graphs[start : start + size]))
        start += size
    return batches


@pytest.mark.parametrize("graph", GRAPHS)
def test_recompiles_are_bounded_by_the_buckets(graph):
    m, construction = encoder("transformer", graph)
    m.train()
    counter = Counter()
    step = CompiledDense(m, backend=counter)
    sizes = [4] * 24 + [3]  # a full batch size, and the epoch's last, short batch
    batches = listops_batches(construction, sizes)
    shapes = set()
    for g in batches:
        step(g).sum().backward()
        shapes.add((g.batch_size, bucket_length(int(g.batch_num_nodes().max()))))
    largest = {int(g.batch_num_nodes().max()) for g in batches}
    assert len(largest) > len(shapes)  # without buckets there would be more shapes: the test can tell
    assert counter.graphs == len(shapes)  # one graph per (batch size, bucket): none re-made
    for g in batches[:5]:  # seen shapes: nothing new
        step(g)
    assert counter.graphs == len(shapes)


@pytest.mark.slow
@pytest.mark.parametrize("model,graph", [("transformer", "complete"), ("gcn", "tree")])
def test_compiled_and_eager_agree(model, graph):
    """Inductor's code against the eager model (dropout off), logits and every parameter's gradient."""
    m, construction = encoder(model, graph, dropout=0.0, attn_dropout=0.0)
    m.train()
    g = batch(construction)
    weights = torch.linspace(-1, 1, g.batch_size * 10).view(g.batch_size, 10)  # a non-trivial loss

    def logits_and_grads(forward):
        m.zero_grad()
        logits = forward(g)
        (logits * weights).sum().backward()
        return logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}

    eager, eager_grads = logits_and_grads(m)
    compiled, compiled_grads = logits_and_grads(CompiledDense(m))
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)
    assert compiled_grads.keys() == eager_grads.keys() and len(eager_grads) > 5
    for name in eager_grads:
        torch.testing.assert_close(compiled_grads[name], eager_grads[name], rtol=1e-5, atol=1e-6, msg=name)


def test_message_passing_batches_run_eager_and_say_so_once(caplog):
    m, construction = encoder("transformer", "tree", impl="sparse")  # every batch to DGL's message passing
    m.eval()
    counter = Counter()
    step = CompiledDense(m, backend=counter)
    g = batch(construction)
    with caplog.at_level(logging.INFO, logger="train"):
        outs = [step(g) for _ in range(3)]
    torch.testing.assert_close(outs[0], m(g))
    assert counter.graphs == 0
    said = [r.getMessage() for r in caplog.records if "trainer.compile" in r.getMessage()]
    assert len(said) == 1 and "message passing" in said[0] and "eagerly" in said[0], said


def test_compile_takes_the_multi_tensor_optimiser():
    cfg = compose_config(["optim=adamw"])
    params = [torch.nn.Parameter(torch.randn(3))]
    assert make_optimizer(params, cfg.optim).defaults["foreach"] is None  # off: torch's default, as before
    assert make_optimizer(params, cfg.optim, torch.device("cpu")).defaults["foreach"] is True
    assert multi_tensor(torch.device("cuda")) == {"fused": True}


def test_train_with_compile_traced(tmp_path, tiny_overrides, monkeypatch):
    """train.py's whole path with trainer.compile=true, compiled by aot_eager (forward and backward traced, no
    code generated: seconds); the next test generates the code."""
    monkeypatch.setattr(compiled, "BACKEND", "aot_eager")
    test_train_with_compile(tmp_path, tiny_overrides)


@pytest.mark.slow
def test_train_with_compile(tmp_path, tiny_overrides):
    overrides = ["model=transformer", "graph=complete", "model.impl=dense", "model.hidden_dim=16"]
    overrides += ["model.num_layers=1", "trainer.max_epochs=3", "optim.lr=3e-3", "trainer.compile=true"]
    results = run(compose_config(tiny_overrides + overrides), tmp_path)
    rows = (tmp_path / "metrics.csv").read_text().splitlines()[1:]
    losses = [float(r.split(",")[3]) for r in rows]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results)) and 0 <= on_disk["test_acc"] <= 1
