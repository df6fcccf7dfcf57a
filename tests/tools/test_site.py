"""The tutorial website (tools/site.py, mkdocs.yml), checked the way a reader meets it.

Fast tests (in ``make test``) check the staging step: equations become MathML, repository links
become site links, a missing notebook or a broken link is a one-line error that names the fix.

The slow test (``make docs-check``) builds the whole site from the executed tutorials, serves it
over HTTP and opens every tutorial page, and the experiment pages, in headless Chromium. On each it
asserts what a reader must see: the title, rendered equations (MathML boxes with a size), the
executed outputs (the SDPA check on page 1), every image decoded, no Python traceback, and every
link to the site resolving (the page exists, and so does the #anchor). Screenshots of each page go
to build/site_check/.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tools import site

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site"
SHOTS = ROOT / "build" / "site_check"

# ---------------------------------------------------------------------------- staging (fast)


def test_equations_become_mathml_and_code_is_left_alone():
    text = "Score $s_{ji} = k_j \\cdot q_i$ and\n\n$$h_i' = \\sum_j a_{ij} v_j$$\n\nbut `price $5 and $6` stays."
    out = site.to_mathml(text)
    assert out.count("<math") == 2
    assert 'display="block"' in out and 'display="inline"' in out
    assert "<msub><mi>s</mi>" in out  # s_{ji} is a subscript, not the text "s_{ji}"
    assert "`price $5 and $6`" in out  # code spans untouched
    assert "$" not in out.replace("`price $5 and $6`", "")


def test_links_follow_the_files_to_their_place_on_the_site(tmp_path):
    stager = site.Stager(tmp_path)
    readme = (
        "[map](models/aggregators/transformer.py) [essay](docs/essay.md#the-answers) [part 1](tutorials/01_attention_is_message_passing.py) "
        "[web](https://www.dgl.ai) [top](#quickstart) ![fig](docs/figures/heads_by_depth.png)\n"
        "```\n[not a link](nowhere.py)\n```\n"
    )
    out = stager.rewrite_links(readme, "README.md", html=False)
    assert "[map](source/models/aggregators/transformer.py.md)" in out
    assert "[essay](essay.md#the-answers)" in out
    assert "[part 1](tutorials/01_attention_is_message_passing.ipynb)" in out
    assert "(https://www.dgl.ai)" in out and "(#quickstart)" in out
    assert "![fig](figures/heads_by_depth.png)" in out
    assert "[not a link](nowhere.py)" in out  # fenced code is not rewritten
    assert stager.sources == {"models/aggregators/transformer.py"}
    # from a docs page one level down, and in a notebook (final .html addresses)
    assert "[c](source/conf/model/gin.yaml.md)" in stager.rewrite_links(
        "[c](../conf/model/gin.yaml)", "docs/essay.md", False
    )
    nb = stager.rewrite_links(
        "[e](../docs/essay.md) [p2](02_one_encoder_three_aggregators.py)", "tutorials/01_x.py", True
    )
    assert "[e](../essay.html)" in nb and "[p2](02_one_encoder_three_aggregators.html)" in nb


def test_a_broken_link_or_an_unexecuted_notebook_is_a_clear_error(tmp_path, monkeypatch):
    stager = site.Stager(tmp_path)
    with pytest.raises(site.SiteError, match="docs/nope.md does not exist"):
        stager.rewrite_links("[gone](docs/nope.md)", "README.md", html=False)
    monkeypatch.setattr(site, "NOTEBOOKS", tmp_path / "notebooks")
    with pytest.raises(site.SiteError, match="run `make notebooks`"):
        stager.notebook(ROOT / "tutorials" / "01_attention_is_message_passing.py")
    (tmp_path / "notebooks").mkdir()
    unexecuted = {"cells": [{"cell_type": "code", "execution_count": None, "source": "1", "outputs": []}]}
    (tmp_path / "notebooks" / "01_attention_is_message_passing.ipynb").write_text(json.dumps(unexecuted))
    with pytest.raises(site.SiteError, match="never executed: run `make notebooks`"):
        stager.notebook(ROOT / "tutorials" / "01_attention_is_message_passing.py")


def test_folder_links_get_a_listing_page(tmp_path):
    stager = site.Stager(tmp_path)
    out = stager.rewrite_links("[configs](../conf/scale)", "docs/essay.md", html=False)
    assert "[configs](source/conf/scale/index.md)" in out
    stager.folder_listings()
    listing = (tmp_path / "source" / "conf" / "scale" / "index.md").read_text()
    assert "[full.yaml](full.yaml.md)" in listing and "[small.yaml](small.yaml.md)" in listing
    assert {"conf/scale/full.yaml", "conf/scale/small.yaml"} <= stager.sources


# ---------------------------------------------------------------------------- the browser (slow)

TUTORIAL_PAGES = {  # page -> (title the reader sees, text an executed cell printed, figures at least)
    "tutorials/01_attention_is_message_passing.html": (
        "Attention is message passing",
        "message passing on the complete graph == scaled_dot_product_attention",
        1,
    ),
    "tutorials/02_one_encoder_three_aggregators.html": (
        "One encoder",
        "sparse == dense for every aggregator on both graphs",
        0,
    ),
    "tutorials/03_graphs_for_sentences.html": (
        "Graphs for sentences",
        "chain Laplacian eigenvectors are cosines of the position",
        3,
    ),
    "tutorials/04_hardware_lottery.html": ("hardware lottery", "sparse and dense outputs agree on every batch", 0),
    "tutorials/05_what_the_experiments_found.html": (
        "What the experiments found",
        "claims checked against docs/results/",
        1,
    ),
    "tutorials/06_a_pretrained_transformer_is_a_graph_network.html": (
        "A pretrained Transformer is a graph network",
        "DGL message passing == HF BertModel",
        3,
    ),
}
OTHER_PAGES = [
    "index.html",
    "tutorials/index.html",
    "essay.html",
    "listops.html",
    "real_sentences.html",
    "long_range.html",
    "hardware_lottery.html",
]

READ_PAGE = """(() => {
  const boxes = [...document.querySelectorAll('math')].map(m => m.getBoundingClientRect());
  const article = document.querySelector('article') || document.body;
  return {
    title: document.title,
    h1: (document.querySelector('article h1') || {}).textContent || '',
    equations: boxes.length,
    equations_drawn: boxes.filter(b => b.width > 0 && b.height > 0).length,
    images: [...article.querySelectorAll('img')].map(i => ({src: i.src.slice(0, 80), ok: i.complete && i.naturalWidth > 0})),
    text: article.innerText,
    stderr: [...document.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"]')].map(e => e.innerText),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
  };
})()"""


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(value for name, value in attrs if name in ("id", "name") and value)


@functools.cache
def _anchors(path: Path) -> frozenset[str]:
    parser = _Ids()
    parser.feed(path.read_text(errors="replace"))
    return frozenset(parser.ids)


@pytest.fixture(scope="module")
def served_site():
    """Build the site as `make docs` does, then serve build/site on a free local port."""
    from tests.helpers.browser import INSTALL_HINT, find_browser

    if find_browser() is None:
        message = f"no headless browser: {INSTALL_HINT}"
        if os.environ.get("TAGNN_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    if not os.environ.get("TAGNN_SITE_BUILT"):  # make docs-check has just built it
        for step in ("notebooks", "build"):
            done = subprocess.run([sys.executable, "-m", "tools.site", step], cwd=ROOT, capture_output=True, text=True)
            assert done.returncode == 0, f"tools.site {step} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (SITE / "index.html").is_file()
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output for failures
        pass


def _check_links(page: str, links: list[str], base: str) -> list[str]:
    """Every link into the site names a file that exists, and its #anchor an id on that page."""
    broken = []
    for link in links:
        if not link.startswith(base):
            continue  # external: not ours to check offline
        parsed = urllib.parse.urlparse(link)
        path = SITE / urllib.parse.unquote(parsed.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            broken.append(f"{page}: {link} (no such file)")
        elif parsed.fragment and path.suffix == ".html" and parsed.fragment not in _anchors(path):
            broken.append(f"{page}: {link} (no #{parsed.fragment} on that page)")
    return broken


@pytest.mark.slow
def test_the_site_reads_as_a_tutorial_in_a_browser(served_site):
    from tests.helpers.browser import Chromium

    base = served_site
    problems: list[str] = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    with Chromium() as browser:
        for page in [*TUTORIAL_PAGES, *OTHER_PAGES]:
            browser.open(urllib.parse.urljoin(base, page))
            seen = browser.evaluate(READ_PAGE)
            browser.screenshot(SHOTS / (page.replace("/", "__").replace(".html", ".png")))
            if "Traceback (most recent call last)" in seen["text"] or any("Error" in e for e in seen["stderr"]):
                problems.append(f"{page}: a Python traceback or error is on the page")
            broken_images = [i["src"] for i in seen["images"] if not i["ok"]]
            if broken_images:
                problems.append(f"{page}: images that did not load: {broken_images}")
            problems += _check_links(page, seen["links"], base)
            if page in TUTORIAL_PAGES:
                title, printed, figures = TUTORIAL_PAGES[page]
                if title.lower() not in seen["title"].lower() or title.lower() not in seen["h1"].lower():
                    problems.append(f"{page}: title {seen['title']!r} / heading {seen['h1']!r} lacks {title!r}")
                if not seen["equations_drawn"]:
                    problems.append(f"{page}: no rendered equation ({seen['equations']} <math> elements)")
                if printed not in seen["text"]:
                    problems.append(f"{page}: the executed output {printed!r} is not on the page")
                script = "tutorials/" + page.split("/")[-1].replace(".html", ".py")
                if f"Reproduce this page: python {script}" not in seen["text"]:
                    problems.append(f"{page}: does not end with the command that reproduces it")
                if len(seen["images"]) < figures:
                    problems.append(f"{page}: {len(seen['images'])} figures, expected at least {figures}")
    shots = sorted(SHOTS.glob("*.png"))
    assert len(shots) >= len(TUTORIAL_PAGES) + len(OTHER_PAGES)
    assert all(shot.stat().st_size > 10_000 for shot in shots), "a screenshot is blank"
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_link_in_every_page_of_the_site_resolves(served_site):
    """The browser test reads the pages a reader starts from; this reads all of them, statically."""
    href = re.compile(r"""(?:href|src)="([^"]+)\"""")
    broken = []
    pages = sorted(SITE.rglob("*.html"))
    assert len(pages) > 20
    for path in pages:
        page = path.relative_to(SITE).as_posix()
        links = [
            urllib.parse.urljoin(served_site + page, link)
            for link in href.findall(path.read_text(errors="replace"))
            if not link.startswith(("data:", "javascript:", "mailto:"))
        ]
        broken += _check_links(page, links, served_site)
    assert not broken, "\n".join(broken[:40])


def test_page_hook_repairs_cut_anchors_and_drops_the_mathjax_block():
    from tools import site_hooks

    html = (
        '<h2 id="3-the-modelimplauto-rule">3. The model.impl=auto rule</h2><h2 id="2-timing-both">x</h2>'
        '<h2 id="2-timing-both-again">y</h2>'
        '<a href="#3-the-rule">toc</a><a href="#2-timing">ambiguous</a><a href="#gone">none</a>'
        '<script src=""> </script>'
        '<script type="text/x-mathjax-config">MathJax.Hub.Config({})</script>'
    )
    out = site_hooks.on_post_page(html, None, None)
    assert 'href="#3-the-modelimplauto-rule"' in out  # the one id whose words contain the cut anchor's
    assert 'href="#2-timing"' in out and 'href="#gone"' in out  # two candidates, or none: left alone
    assert "x-mathjax-config" not in out and '<script src="">' not in out
