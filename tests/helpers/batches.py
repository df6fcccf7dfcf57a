"""Small batches of real graphs for model tests."""

import dgl

from data import listops


def listops_batch(construction, num=6, seed=1, max_length=30):
    examples = list(listops.generate(num, seed=seed, max_length=max_length))
    ids = {t: i + 3 for i, t in enumerate(listops.TOKENS)}
    return dgl.batch([construction([ids[t] for t in ex["tokens"]], ex["heads"]) for ex in examples]), examples
