"""bench.phrase_epoch on a treebank the test writes: both training sets are measured and the page states them."""

from bench import phrase_epoch
from tests.data.test_real_sentences import write_treebank


def test_phrase_epoch_measures_both_training_sets(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the parse cache goes under tmp_path/.cache
    data = write_treebank(tmp_path / "trees")
    assert phrase_epoch.main(["--data-dir", str(data), "--quick", "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "phrase_epoch.md").read_text()
    assert "| sentences | 4 | " in page and "| phrases (dataset.train_phrases=true) | 21 | " in page
    m = phrase_epoch.measure(str(data), repeat=1)
    assert m["sentences"]["steps"] == 1 and m["phrases"]["steps"] == 1  # 4 and 21 examples: one batch of 32 each
    assert m["phrases"]["pieces_per_batch"] > 0 and m["phrases"]["step_s"] > 0
