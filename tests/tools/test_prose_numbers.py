"""The numbers in README, docs/*.md and the tutorials that check_docs cannot tie to a record: listed, by page
and kind, in the committed allow-list docs/results/unchecked_numbers.json (issue 35)."""

import json
import re

from tools import check_docs


def committed() -> dict:
    return json.loads((check_docs.ROOT / check_docs.UNTIED).read_text())["pages"]


def test_the_numbers_no_reference_ties_are_exactly_the_committed_list():
    """A new restated number without a reference fails here: tie it (<!-- ref: -->, <!-- restates: -->) or,
    for a published anchor or a hardware fact, list it (python -m tools.check_docs --write-untied)."""
    assert check_docs.untied() == committed()


def test_a_reference_or_a_restated_table_takes_a_number_off_the_list(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs" / "results").mkdir()
    (tmp_path / "docs" / "results" / "t.md").write_text("| model | acc |\n|---|---|\n| gat | 0.512 |\n")
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    page.write_text("GAT reaches 0.512, Shen et al. (2019) report 57.4, on 2 cores in 3.5 h.\n")
    assert check_docs.untied() == {"README.md": {"published": ["0.512", "57.4", "3.5"]}}
    page.write_text("GAT reaches 0.512.\nA run takes 3.5 h.\n\n```\n0.25 in a code block\n```\n")
    assert check_docs.untied() == {"README.md": {"untied": ["0.512"], "hardware": ["3.5"]}}
    page.write_text("GAT reaches 0.512 <!-- ref: docs/results/t.md > gat > acc -->.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text("<!-- restates: docs/results/t.md -->\n| model | acc |\n|---|---|\n| gat | 0.512 |\n")
    assert check_docs.untied() == {} and check_docs.check_restated() == []


def test_a_reference_after_a_mean_and_std_ties_and_checks_both(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs" / "results" / "t.md").write_text("| model | acc |\n|---|---|\n| gat | 0.512 ± 0.007 (n=3) |\n")
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    page.write_text("GAT reaches 0.512 ± 0.007 <!-- ref: docs/results/t.md > gat > acc -->, 3 seeds.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text("GAT reaches 51.2 ± 0.8% <!-- ref: docs/results/t.md > gat > acc -->.\n")
    assert check_docs.check_refs() == ["README.md:1: says 0.8, docs/results/t.md:3 has 0.007"]
    page.write_text("GAT reaches 0.512 (std 0.007 <!-- ref: docs/results/t.md > gat > acc@1 -->).\n")
    assert check_docs.untied() == {"README.md": {"untied": ["0.512"]}} and check_docs.check_refs() == []


def test_a_two_author_citation_is_published_a_possessive_s_is_not_seconds_a_version_no_result(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text(
        "A Tree-LSTM reaches 98.7% (Nangia & Bowman 2018).\nThe Transformer's 0.577 on SST's test split.\nIt took 3.5 s.\n"
        "The machine ran at load average 2.3.\n"
        "Measured with torch 2.2.1+cu121 and dgl 2.1.0.\n"
    )
    assert check_docs.untied() == {
        "README.md": {"published": ["98.7"], "untied": ["0.577"], "hardware": ["3.5", "2.3"]}
    }


def test_in_a_tutorials_code_only_a_claims_line_counts_and_not_the_numbers_in_its_strings(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text("No numbers.\n")
    (tmp_path / "tutorials" / "01_x.py").write_text(
        "# ---\n# jupyter:\n#   format_version: '1.3'\n# ---\n\n"
        '# The tree wins by 9.1 points.\nprint(f"{acc:8.1f}", version="1.3", figsize=(6.5, 3))\n'
        'CLAIMS = [("warmup 0.0", 2.9)]  # ref: docs/results/t.md > x > y\n'
    )
    assert check_docs.untied() == {"tutorials/01_x.py": {"untied": ["9.1"]}}  # 2.9: tied (the ref is not checked here)


def test_a_reference_names_a_row_in_full_where_rows_differ_only_in_a_parenthesis(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "t.md").write_text(
        "| case | time |\n|---|---|\n| complete (sparse) | 2.14 |\n| complete (dense) | 1.69 |\n"
    )
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    assert check_docs.resolve("docs/results/t.md > complete (dense) > time", "p")[0] == ["1.69"]
    assert check_docs.resolve("docs/results/t.md > complete > time", "p")[0] == ["2.14"]  # the first, as before


def test_a_thousands_separator_is_part_of_the_number():
    assert check_docs.numbers("8,164 µs at n = 2,048; seeds 0, 1, 2; −1.5") == ["8164", "2048", "0", "1", "2", "-1.5"]


def _results_page(tmp_path, monkeypatch, text: str):
    """A repository of one results page, docs/results/t.md holding ``text``; its README, to write prose in."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs" / "results" / "t.md").write_text(text)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    return tmp_path / "README.md"


def test_a_reference_to_a_difference_of_two_cells(tmp_path, monkeypatch):
    page = _results_page(tmp_path, monkeypatch, "| model | tree | complete |\n|---|---|---|\n| gat | 0.625 | 0.478 |\n")
    ref = "<!-- ref: docs/results/t.md > gat > tree minus docs/results/t.md > gat > complete -->"
    page.write_text(f"The tree wins by 14.7 {ref} points.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text(f"The tree wins by 14.8 {ref} points.\n")
    assert check_docs.check_refs() == [
        "README.md:1: says 14.8, docs/results/t.md:3 minus docs/results/t.md:3 has 0.147"
    ]


def test_a_table_rows_numbers_take_the_kind_of_their_own_cell_and_the_rows_label(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text(
        "| task | ours | Tai et al. | target |\n|---|---|---|---|\n| SST | 0.766 | 0.880 (Tai et al.) | ≥ 0.85 |\n"
        "| LRA (Tay et al., 2021): Transformer | 0.364 | | |\n"
    )
    assert check_docs.untied() == {"README.md": {"untied": ["0.766", "0.85"], "published": ["0.880", "0.364"]}}


def test_a_reference_to_a_config_value(tmp_path, monkeypatch):
    (tmp_path / "conf" / "optim").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "conf" / "optim" / "a.yaml").write_text("lr: 3.0e-5\nbetas: [0.9, 0.999]\n")
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    page.write_text(
        "Betas (0.9 <!-- ref: conf/optim/a.yaml > betas > 0 -->, 0.999 <!-- ref: conf/optim/a.yaml > betas > 1 -->).\n"
    )
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text("Beta 0.98 <!-- ref: conf/optim/a.yaml > betas > 1 -->.\n")
    assert check_docs.check_refs() == ["README.md:1: says 0.98, conf/optim/a.yaml has 0.999"]


def test_a_reference_to_a_ratio_of_two_cells(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs" / "results" / "t.md").write_text(
        "| case | n=128 | n=4096 |\n|---|---|---|\n| bpt | 228.15 | 398.25 |\n"
    )
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    ref = "<!-- ref: docs/results/t.md > bpt > n=4096 over docs/results/t.md > bpt > n=128 -->"
    page.write_text(f"Its time grows 1.75× {ref} from 128 to 4,096.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text(f"Its time grows 1.85× {ref}.\n")
    problem = check_docs.check_refs()
    assert len(problem) == 1 and problem[0].startswith(
        "README.md:1: says 1.85, docs/results/t.md:3 over docs/results/t.md:3 has 1.745"
    )
    (tmp_path / "docs" / "results" / "u.md").write_text(
        "| run | one pass over the batches (s) |\n|---|---|\n| 1 | 5.8 |\n"
    )
    page.write_text("A pass took 5.8 s <!-- ref: docs/results/u.md > 1 > one pass over the batches (s) -->.\n")
    assert check_docs.check_refs() == []  # "over" inside a column's name is no ratio


def test_a_binomial_noise_reference_is_worked_out_again_from_n_and_p(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    page.write_text(
        "500 questions: about 1.8 <!-- ref: noise n=500 p=0.80 --> points at 80%, 2.5 <!-- ref: noise n=500 "
        "p=0.80 difference --> for a difference; gaps under 1.4 <!-- ref: noise n=10,000 p=0.60 difference x2 -->.\n"
    )
    assert check_docs.untied() == {"README.md": {"untied": ["80"]}} and check_docs.check_refs() == []  # 80%: a share
    page.write_text("Gaps under 1.5 <!-- ref: noise n=10,000 p=0.60 difference x2 --> points are noise.\n")
    (problem,) = check_docs.check_refs()
    assert problem.startswith("README.md:1: says 1.5, the binomial standard error (noise n=10,000 p=0.60 difference")
    page.write_text("About 1.8 <!-- ref: noise n=500 -->.\n")
    assert check_docs.check_refs() == ["README.md:1: reference 'noise n=500': write noise n=N p=P [difference] [xK]"]


def test_a_quoted_paragraph_and_the_table_after_it_are_listed_as_quoted(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text(
        "Our run: 0.577.\n\n"
        "The issue's H100: <!-- quoted: issue 32, a scratch script at 7ef2f89 -->\nratios of 0.98 and\n1.01:\n\n"
        "| n | complete |\n|---|---|\n| 64 | 11.7 |\n\n"
        "| ours | complete |\n|---|---|\n| 64 | 0.455 |\n\n"
        "Back to ours: 0.478.\nIn 3.5 s.\n\n"
        "- <!-- quoted: issue 32 --> An H100 item: 0.57\n  and 0.78,\n- and our item: 0.437.\n\n"
        "<!-- quoted: --> A marker that names no source quotes nothing: 0.61.\n"
    )
    assert check_docs.untied() == {
        "README.md": {
            "untied": ["0.577", "0.455", "0.478", "0.437", "0.61"],
            "quoted": ["0.98", "1.01", "11.7", "0.57", "0.78"],
            "hardware": ["3.5"],
        }
    }


def test_published_recipe_is_no_citation_and_newer_than_a_version_is_a_version(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "tutorials").mkdir()
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    (tmp_path / "README.md").write_text(
        "Missed by 5.1 points with the published recipe.\nLRA's published Transformer: 0.364.\n"
        "DGL ships no CUDA build for torch newer than 2.4.\n"
    )
    assert check_docs.untied() == {"README.md": {"untied": ["5.1"], "published": ["0.364"]}}


# ---------------------------------------------------------------- integers: "N of M" (issue 35)


def _record(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "docs" / "results" / "p.json").write_text('{"kept": 29, "total": 32, "acc": 0.5708}\n')
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    return tmp_path / "README.md"


def test_an_integer_of_the_evidence_is_stated_only_by_that_integer():
    assert check_docs.same("29", 29) and check_docs.same("29", "29") and check_docs.same("−3", -3)
    assert not check_docs.same("28", 29) and not check_docs.same("29.0", 29) and not check_docs.same("0.29", 29)
    assert check_docs.same("29", 28.6) and check_docs.same("57", 0.5708)  # a decimal still rounds, as before


def test_an_n_of_m_no_reference_ties_is_listed_and_references_tie_n_then_m(tmp_path, monkeypatch):
    page = _record(tmp_path, monkeypatch)
    n, m = "<!-- ref: docs/results/p.json > kept -->", "<!-- ref: docs/results/p.json > total -->"
    page.write_text("Keeping 29 of 32 heads, 12 of the 13 cells; 3 seeds, 8 epochs.\n")
    assert check_docs.untied() == {"README.md": {"untied": ["29", "32", "12", "13"]}}
    page.write_text(f"Keeping 29 of 32 {n} heads scores 0.571 <!-- ref: docs/results/p.json > acc -->.\n")
    assert check_docs.untied() == {"README.md": {"untied": ["32"]}} and check_docs.check_refs() == []
    page.write_text(f"Keeping 29 of 32 {n} {m} heads.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text(f"Keeping 28 of 32 {n} {m} heads.\n")
    assert check_docs.check_refs() == ["README.md:1: says 28, docs/results/p.json has 29"]
    page.write_text(f"Keeping 29 of 31 {n} {m} heads.\n")
    assert check_docs.check_refs() == ["README.md:1: says 31, docs/results/p.json has 32"]
    page.write_text(f"Keeping 29 of 32 {n} {m} {m} heads.\n")
    assert check_docs.check_refs() == ["README.md:1: a third reference after 29 of 32"]


def test_an_n_of_m_takes_its_kind_and_a_config_marker_lists_settings_as_config(tmp_path, monkeypatch):
    page = _record(tmp_path, monkeypatch)
    page.write_text(
        "Tai et al. (2015) keep 3 of 4 gates.\nA run takes 2 of 3 hours.\n"
        "Warmup is 8 of 160 <!-- config: conf/optim/a.yaml, 5% of 160 steps --> steps.\n"
        "Done: 29 of its 45 <!-- ref: docs/results/p.json > kept --> <!-- config: the grid, 45 cells --> runs.\n"
    )
    assert check_docs.untied() == {
        "README.md": {"published": ["3", "4"], "hardware": ["2", "3"], "config": ["8", "160", "45"]}
    }
    assert check_docs.check_refs() == []


def test_a_quoted_marker_in_a_table_cell_quotes_that_cell_only(tmp_path, monkeypatch):
    page = _record(tmp_path, monkeypatch)
    page.write_text(
        "| question | before | now |\n|---|---|---|\n"
        "| heads kept | 23 of 32 <!-- quoted: the page before abc123 --> | 29 of 32 |\n"
        "| accuracy | 0.478 | 0.577 |\n"
    )
    assert check_docs.untied() == {"README.md": {"quoted": ["23", "32"], "untied": ["29", "32", "0.478", "0.577"]}}


def test_a_count_reference_counts_a_tables_cells_again(tmp_path, monkeypatch):
    page = _record(tmp_path, monkeypatch)
    (tmp_path / "docs" / "results" / "t.md").write_text(
        "**Test accuracy**\n\n| model | a | b |\n|---|---|---|\n"
        "| x | 0.77 ± 0.056 (n=3) | 0.85 ± 0.009 (n=3) |\n| y | 0.79 ± 0.015 (n=3) | – |\n\n"
        "**Test accuracy by length**\n\n| model | a |\n|---|---|\n| x | 0.1 ± 0.5 |\n"
    )
    ref = (
        "<!-- ref: count docs/results/t.md > Test accuracy > @1 >= 0.015 --> "
        "<!-- ref: count docs/results/t.md > Test accuracy > @1 -->"
    )
    page.write_text(f"The std reaches 1.5 points in 2 of the 3 {ref} cells.\n")
    assert check_docs.check_refs() == [] and check_docs.untied() == {"README.md": {"untied": ["1.5"]}}
    assert check_docs.count("count docs/results/t.md > Test accuracy > b@0", "p")[0] == ["1"]
    assert check_docs.count("count docs/results/t.md > length > @1 < 0.5", "p")[0] == ["0"]
    page.write_text(f"The std reaches 1.5 points in 3 of the 3 {ref} cells.\n")
    assert check_docs.check_refs() == [
        "README.md:1: says 3, docs/results/t.md (table '**Test accuracy**': cells with a number @1 >= 0.015) has 2"
    ]
    page.write_text("In 2 <!-- ref: count docs/results/t.md > Test accuracy > c@1 --> cells.\n")
    assert check_docs.check_refs() == ["README.md:1: docs/results/t.md's table 'Test accuracy' has no column 'c'"]
    page.write_text("In 2 <!-- ref: count docs/results/t.md > Test accuracy -->.\n")
    assert check_docs.check_refs() == [
        "README.md:1: reference 'count docs/results/t.md > Test accuracy': "
        "write count FILE > TABLE TITLE > [COLUMN]@k [OP X]"
    ]


def test_an_integer_restated_in_the_essay_and_edited_by_hand_fails_naming_file_and_line(tmp_path, monkeypatch):
    """On a copy of the repository's pages: "29 of 32" heads made "28 of 32", "12 of the 13" cells "11 of the 13",
    "35–41%" "36–41%"."""
    import shutil

    for name in ("docs", "conf", "tutorials"):
        shutil.copytree(check_docs.ROOT / name, tmp_path / name)
    shutil.copy(check_docs.ROOT / "README.md", tmp_path / "README.md")
    for entry in check_docs.ROOT.iterdir():  # what else the pages cite (code, bench results): as it is
        if not (tmp_path / entry.name).exists() and entry.name not in (".git", ".venv", "multirun", "outputs"):
            (tmp_path / entry.name).symlink_to(entry)
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    assert check_docs.check_refs() == [] and check_docs.untied() == committed()
    lines = {}
    for page, old, new in [
        ("docs/essay.md", "Keeping the 29 of 32", "Keeping the 28 of 32"),
        ("docs/real_sentences.md", "in 12 of the 13", "in 11 of the 13"),
        ("docs/real_sentences.md", "stays within 35 <!--", "stays within 36 <!--"),  # a share: 35–41%
    ]:
        text = (tmp_path / page).read_text()
        assert old in text
        lines[new] = text[: text.index(old)].count("\n") + 1
        (tmp_path / page).write_text(text.replace(old, new, 1))
    assert check_docs.check() == [  # what python -m tools.check_docs prints
        f"docs/essay.md:{lines['Keeping the 28 of 32']}: says 28, docs/results/prune_heads/prune.json has 29",
        f"docs/real_sentences.md:{lines['in 11 of the 13']}: says 11, docs/results/trec.md (table "
        "'**Test accuracy**': cells with a number @1 >= 0.015) has 12",
        f"docs/real_sentences.md:{lines['stays within 36 <!--']}: says 36, docs/results/sst.md:67 has 0.354",
    ]
    text = (tmp_path / "docs" / "essay.md").read_text()
    recorded = re.search(r"(\d+) of 45 <!-- ref", text).group(1)  # graph_choice's runs recorded
    (tmp_path / "docs" / "essay.md").write_text(
        text.replace(f"{recorded} of 45 <!-- ref", f"{recorded} of 45 <!-- REF", 1)
    )
    assert check_docs.untied()["docs/essay.md"]["config"] == [recorded, "45", "8", "160"]  # its tie gone: listed


def test_an_integer_percentage_is_listed_and_a_reference_after_it_or_its_percent_sign_ties_it(tmp_path, monkeypatch):
    page = _record(tmp_path, monkeypatch)
    (tmp_path / "docs" / "results" / "m.json").write_text('{"lo": 0.1968, "hi": 0.2306, "child": 1.0}\n')
    lo, hi = "<!-- ref: docs/results/m.json > lo -->", "<!-- ref: docs/results/m.json > hi -->"
    page.write_text("A head puts 20–23% of its mass on the tree, the offset scores 100%; 1.5% and 10 % warmup.\n")
    assert check_docs.untied() == {"README.md": {"untied": ["1.5", "20", "23", "100", "10"]}}
    page.write_text(f"0.577, and 20 {lo}–23% {hi} of its mass; 100% <!-- ref: docs/results/m.json > child -->.\n")
    assert check_docs.untied() == {"README.md": {"untied": ["0.577"]}} and check_docs.check_refs() == []
    page.write_text(f"A head puts 20 {lo}–24% {hi} of its mass.\n")
    assert check_docs.check_refs() == ["README.md:1: says 24, docs/results/m.json has 0.2306"]
    page.write_text("Not rejected at 1% <!-- config: the level of tests/x.py's chi-square test -->; 57% of 4 cores.\n")
    assert check_docs.untied() == {"README.md": {"config": ["1"], "hardware": ["57"]}}


def test_a_results_pages_written_analysis_counts_and_its_replayed_table_does_not(tmp_path, monkeypatch):
    """Below a results page's first '## ' is prose that restates its table: an untied number there is listed.
    The table above it is replayed (or sealed), and a page a tool renders whole from JSON is replayed whole."""
    results = tmp_path / "docs" / "results"
    results.mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    (tmp_path / "README.md").write_text("No numbers.\n")
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    table = "| model | acc |\n|---|---|\n| gat | 0.512 |\n"
    (results / "t.md").write_text(f"{table}\n## What it says\n\nGAT reaches 0.512 and wins by 2.4 points.\n")
    (results / "pretrained_graphs.md").write_text(f"{table}\n## Rendered whole from JSON\n\n0.512\n")
    (results / "no_analysis.md").write_text(table)
    assert check_docs.untied() == {"docs/results/t.md": {"untied": ["0.512", "2.4"]}}
    (results / "t.md").write_text(
        f"{table}\n## What it says\n\nGAT reaches 0.512 <!-- ref: docs/results/t.md > gat > acc -->.\n"
    )
    assert check_docs.untied() == {} and check_docs.check_refs() == []


def test_a_reference_to_a_difference_of_two_run_records(tmp_path, monkeypatch):
    (tmp_path / "docs" / "results" / "runs").mkdir(parents=True)
    (tmp_path / "tutorials").mkdir()
    lines = [{"overrides": ["experiment=e", f"seed={k}"], "test_acc": acc} for k, acc in ((1, 0.5702), (2, 0.5871))]
    (tmp_path / "docs" / "results" / "runs" / "e.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    page = tmp_path / "README.md"
    monkeypatch.setattr(check_docs, "ROOT", tmp_path)
    ref = "<!-- ref: docs/results/runs/e.jsonl > seed=2 > test_acc minus docs/results/runs/e.jsonl > seed=1 > test_acc -->"
    page.write_text(f"The seeds spread 1.7 {ref} points.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text(f"The seeds spread 1.9 {ref} points.\n")
    (problem,) = check_docs.check_refs()
    assert problem.startswith("README.md:1: says 1.9,") and "has 0.0169" in problem


def test_a_time_in_a_table_is_compared_as_is(tmp_path, monkeypatch):
    """A cell under "training hours" or "wall (s)", or a key naming seconds, is a time: 0.5 h is not 50 h. An
    accuracy may still be written as a percentage (57.7 for 0.577)."""
    page = _results_page(
        tmp_path,
        monkeypatch,
        "| experiment | runs | training hours | acc | wall (s) |\n|---|---|---|---|---|\n| t | 4 | 0.50 | 0.577 | 3.2 |\n",
    )
    hours = "<!-- ref: docs/results/t.md > t > training hours -->"
    acc = "<!-- ref: docs/results/t.md > t > acc -->"
    wall = "<!-- ref: docs/results/t.md > t > wall (s) -->"
    page.write_text(f"It took 0.5 {hours} h and 3.2 {wall} s for 57.7 {acc}%.\n")
    assert check_docs.check_refs() == []
    page.write_text(f"It took 50 {hours} h and 320 {wall} s for 57.7 {acc}%.\n")
    assert check_docs.check_refs() == [
        "README.md:1: says 50, docs/results/t.md:3 has 0.50",
        "README.md:1: says 320, docs/results/t.md:3 has 3.2",
    ]


def test_a_reference_to_a_results_pages_runs_and_training_hours(tmp_path, monkeypatch):
    page = _results_page(
        tmp_path,
        monkeypatch,
        "Produced by `make experiment E=t` from `docs/results/runs/t.jsonl` (39 runs, 0.5 h of training).\n\n"
        "| model | acc |\n|---|---|\n| gat | 0.512 |\n",
    )
    ref = "<!-- ref: docs/results/t.md > training hours -->"
    page.write_text(f"39 <!-- ref: docs/results/t.md > runs --> runs, 0.5 {ref} h of training.\n")
    assert check_docs.untied() == {} and check_docs.check_refs() == []
    page.write_text(f"They took 0.9 {ref} h.\n")
    assert check_docs.check_refs() == ["README.md:1: says 0.9, docs/results/t.md ('Produced by' line) has 0.5"]
    page.write_text(f"They took 50 {ref} h.\n")  # hours are not a fraction: 0.5 h is not 50 h
    assert check_docs.check_refs() == ["README.md:1: says 50, docs/results/t.md ('Produced by' line) has 0.5"]
    results = tmp_path / "docs" / "results" / "t.md"
    below = "\n\nThe earlier grid (1,200 runs, 7.5 h of training) was lost.\n"  # prose below quotes another
    results.write_text(results.read_text() + below)
    page.write_text(f"1,200 <!-- ref: docs/results/t.md > runs --> runs, 7.5 {ref} h.\n")
    assert check_docs.check_refs() == [
        "README.md:1: says 1200, docs/results/t.md ('Produced by' line) has 39",
        "README.md:1: says 7.5, docs/results/t.md ('Produced by' line) has 0.5",
    ]
    results.write_text("(1,200 runs, 7.5 h of training)" + below)  # thousands written with a comma
    assert check_docs.check_refs() == []
    results.write_text("| model | acc |\n|---|---|\n| gat | 0.512 |\n" + below)  # the first line only is read
    assert check_docs.check_refs() == 2 * [  # both references
        "README.md:1: docs/results/t.md's first line says no '(N runs, X h of training)': write the table again "
        "(python -m tools.experiment E --table-only)"
    ]
