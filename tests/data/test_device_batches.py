"""Dense batches made by indexing a split kept on the device (data/device_batches.py) equal the DGL-made ones
(``engine.compiled.padded_inputs`` of ``dgl.batch`` of the same examples), for the complete graph and the tree."""

import dgl
import pytest
import torch

from data import listops
from data.batches import pack_graphs
from data.device_batches import DeviceSplit
from data.graphs import GraphConstruction
from engine.compiled import dense_logits, padded_inputs
from models.dense import bucket_length
from tests.helpers.encoders import graph_encoder


@pytest.mark.parametrize("edge_types", [False, True])
@pytest.mark.parametrize("readout", ["mean", "root"])
@pytest.mark.parametrize("graph", ["complete", "tree"])
def test_device_batches_equal_dgl_batches(graph, readout, edge_types):
    construction = GraphConstruction(name=graph)
    examples = list(listops.generate(40, seed=1, max_length=60, root_operator=True))
    ids = {t: i + 3 for i, t in enumerate(listops.TOKENS)}
    graphs = [construction([ids[t] for t in ex["tokens"]], ex["heads"]) for ex in examples]
    labels = torch.tensor([ex["label"] for ex in examples])
    torch.manual_seed(0)
    knobs = {"hidden_dim": 16, "num_layers": 1, "num_heads": 2, "impl": "dense", "readout": readout}
    m = graph_encoder(20, 10, construction=construction, edge_types=edge_types, **knobs).eval()
    split = DeviceSplit(
        pack_graphs(graphs), labels, "cpu", construction.dense_complete, edge_types, root=readout == "root"
    )
    for indices in ([3, 0, 17, 5], [39], list(range(8, 40, 3))):
        g = dgl.batch([graphs[i] for i in indices])
        largest = int(g.batch_num_nodes().max())
        for pad_to in (None, bucket_length(largest)):
            made, y = split.batch(torch.tensor(indices), pad_to)
            expected = padded_inputs(m, g, pad_to or largest)
            assert torch.equal(y, labels[indices])
            names = ("tok", "pos", "valid", "adj", "etype", "root")
            for name, a, b in zip(names, made, expected):
                assert (a is None) == (b is None), name
                if a is not None:
                    assert a.shape == b.shape and torch.equal(a, b), name
            with torch.no_grad():
                torch.testing.assert_close(dense_logits(m, *made), m(g), atol=1e-5, rtol=1e-5)
