"""tools.doc_counts (run by tools.check_docs): a count a page states agrees with the files, or fails."""

import shutil

import pytest

from tools import check_docs, doc_counts

ROOT = check_docs.ROOT


@pytest.fixture
def pages(tmp_path):
    """The pages and the folders they count, copied: README, docs/*.md, tutorials/, conf/."""
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    for page in (ROOT / "docs").glob("*.md"):
        shutil.copy(page, tmp_path / "docs" / page.name)
    shutil.copytree(ROOT / "tutorials", tmp_path / "tutorials", ignore=shutil.ignore_patterns("_out", "*.ipynb"))
    shutil.copytree(ROOT / "conf", tmp_path / "conf")
    assert doc_counts.check(tmp_path) == []
    return tmp_path


def edit(path, old, new):
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
    return next(k for k, line in enumerate(path.read_text().splitlines(), 1) if new in line)


def test_the_repository_states_true_counts():
    assert doc_counts.check(ROOT) == []
    assert check_docs.check() == []


def test_a_wrong_number_of_tutorials_fails(pages):
    line = edit(pages / "README.md", "a course in six parts", "a course in seven parts")
    assert doc_counts.check(pages) == [
        f"README.md:{line}: says 'seven parts', tutorials/ has 6 parts (tutorials/NN_*.py)"
    ]


def test_a_new_tutorial_makes_the_stated_count_wrong(pages):
    (pages / "tutorials" / "07_more.py").write_text("print('part 7')\n")
    problems = doc_counts.check(pages)
    assert problems and all("tutorials/ has 7 parts" in p for p in problems)
    assert any(p.startswith("README.md:") and "'six parts'" in p for p in problems)


def test_a_config_missing_from_the_group_table_fails(pages):
    (pages / "conf" / "experiment" / "new_one.yaml").write_text("# @package _global_\n")
    (problem,) = doc_counts.check(pages)
    assert problem.startswith("docs/configuration.md:")
    assert problem.endswith("the `experiment` row does not list conf/experiment/: missing new_one")


def test_an_option_with_no_file_fails(pages):
    (pages / "conf" / "optim" / "adagrad.yaml").unlink()
    (problem,) = doc_counts.check(pages)
    assert problem.endswith("the `optim` row does not list conf/optim/: no such file: adagrad")


def test_a_stated_number_of_experiments_is_checked(pages):
    n = len(list((ROOT / "conf" / "experiment").glob("*.yaml")))
    edit(pages / "docs" / "essay.md", "# ", f"# ({n} experiment configs) ")
    assert doc_counts.check(pages) == []
    line = edit(pages / "docs" / "essay.md", f"({n} experiment configs)", f"({n - 1} experiment configs)")
    assert doc_counts.check(pages) == [
        f"docs/essay.md:{line}: says '{n - 1} experiment configs', conf/experiment/ has {n} configs"
    ]


def test_a_test_count_fails(pages):
    line = edit(pages / "README.md", "then the fast suite,", "then 1,037 tests,")
    assert doc_counts.check(pages) == [
        f"README.md:{line}: states a test count ('1,037 tests') that goes stale with every test: "
        "drop it (`pytest --collect-only -q` counts them)"
    ]
