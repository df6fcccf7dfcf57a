"""Stage the website's sources, then let mkdocs build it: ``make docs`` -> build/site/index.html.

The site is made from the repository's own files, nothing is written by hand for it:

* ``README.md`` becomes the entry page, ``docs/*.md`` the experiment pages (with ``docs/results``
  and ``docs/figures`` beside them), ``tutorials/README.md`` the tutorial index;
* the six tutorials come from ``tutorials/*.ipynb``, the notebooks ``make notebooks``
  has just *executed*, so every page shows the code, its printed output and its figures;
* every equation (``$...$`` and ``$$...$$`` in a notebook's markdown) is turned into MathML here,
  at build time, so the browser typesets it with no JavaScript and no network;
* a link to a source file (``models/aggregators.py``, ``conf/model/gin.yaml``) becomes a link to a
  generated page that shows that file, and a link to a folder becomes a generated listing of it.

Links are rewritten from the repository's layout (what GitHub shows) to the site's: markdown pages
keep ``.md`` targets and mkdocs resolves them; in notebooks, which mkdocs-jupyter renders itself,
they are written as the final ``.html`` addresses (``use_directory_urls: false`` in mkdocs.yml, so
the site also opens from disk).
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "site_src"
# beside their scripts: the kernel starts there, where `from _setup import ROOT` finds the helper
NOTEBOOKS = ROOT / "tutorials"

LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")
FENCED = re.compile(r"(^```.*?^```)", re.S | re.M)  # links are rewritten outside fenced blocks
CODE_SPAN = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)  # equations outside any code
ASSETS = {".png", ".svg", ".jpg", ".json", ".csv", ".pdf"}
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$([^$\n]+?)\$(?!\w)", re.S)


class SiteError(RuntimeError):
    """A page the site needs is missing; the message says which command makes it."""


def site_path(repo_path: str) -> str | None:
    """Where a repository file lives on the site (a path under the staged docs dir), or None when
    it is not a page or an asset of the site (a source file: it gets a generated page)."""
    if repo_path == "README.md":
        return "index.md"
    if repo_path == "tutorials/README.md":
        return "tutorials/index.md"
    match = re.fullmatch(r"tutorials/(\d\d_[\w]+)\.py", repo_path)
    if match:
        return f"tutorials/{match.group(1)}.ipynb"
    if repo_path.startswith("docs/"):
        return repo_path[len("docs/") :]
    return None


def shown(path: Path) -> str:
    """A path as a message names it: relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def listing_folder(repo_dir: str) -> str:
    """The site folder whose generated index.md lists a repository folder."""
    mapped = site_path(repo_dir + "/x")
    folder = posixpath.dirname(mapped) if mapped else ""
    return folder if folder else f"source/{repo_dir}"


def source_page(repo_path: str) -> str:
    return f"source/{repo_path}.md"


def to_mathml(text: str) -> str:
    """``$x$`` -> inline MathML, ``$$x$$`` -> a displayed block; code spans are left alone."""
    from latex2mathml.converter import convert

    def one(match: re.Match) -> str:
        display, inline = match.group(1), match.group(2)
        tex = (display if display is not None else inline).strip()
        return convert(tex, display="block" if display is not None else "inline")

    parts = CODE_SPAN.split(text)
    return "".join(part if i % 2 else MATH.sub(one, part) for i, part in enumerate(parts))


class Stager:
    """Copies and rewrites the sources into ``out``; remembers the source pages and folder listings
    its links asked for and writes them at the end."""

    def __init__(self, out: Path):
        self.out = out
        self.sources: set[str] = set()
        self.listings: set[str] = set()
        self.assets: set[str] = set()

    # -- links -------------------------------------------------------------------------------
    def rewrite_links(self, text: str, repo_file: str, html: bool) -> str:
        """Rewrite every markdown link of ``text``, written in ``repo_file`` (a repository path),
        to its address on the site. ``html``: write final .html addresses (notebooks)."""
        here = site_path(repo_file)
        assert here is not None, repo_file

        def one(match: re.Match) -> str:
            target = match.group(2)
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                return match.group(0)  # external, or an anchor on this page
            path, _, anchor = target.partition("#")
            repo_target = posixpath.normpath(posixpath.join(posixpath.dirname(repo_file), path))
            on_site = self.place(repo_target)
            new = posixpath.relpath(on_site, posixpath.dirname(here) or ".")
            if html:
                new = re.sub(r"\.(md|ipynb)$", ".html", new)
            return f"{match.group(1)}{new}{'#' + anchor if anchor else ''}{match.group(3)}"

        parts = FENCED.split(text)
        return "".join(part if i % 2 else LINK.sub(one, part) for i, part in enumerate(parts))

    def place(self, repo_target: str) -> str:
        """The site path a link to ``repo_target`` should point at (and note what must be made)."""
        absolute = ROOT / repo_target
        if not absolute.exists():
            raise SiteError(f"broken link in the sources: {repo_target} does not exist")
        if absolute.is_dir():
            if repo_target == "tutorials":
                return "tutorials/index.md"
            folder = listing_folder(repo_target)
            self.listings.add(repo_target)
            return f"{folder}/index.md"
        mapped = site_path(repo_target)
        if mapped is not None:
            return mapped
        if Path(repo_target).suffix in ASSETS:  # an image or a data file: copied as it is
            self.assets.add(repo_target)
            return f"files/{repo_target}"
        self.sources.add(repo_target)
        return source_page(repo_target)

    # -- pages -------------------------------------------------------------------------------
    def write(self, site_file: str, text: str) -> None:
        path = self.out / site_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def markdown(self, repo_file: str) -> None:
        text = (ROOT / repo_file).read_text()
        self.write(site_path(repo_file), self.rewrite_links(text, repo_file, html=False))

    def notebook(self, script: Path) -> None:
        """An executed notebook, its markdown cells with MathML and site links."""
        executed = NOTEBOOKS / f"{script.stem}.ipynb"
        if not executed.is_file() or executed.stat().st_mtime < script.stat().st_mtime:
            raise SiteError(f"{shown(executed)} is missing or older than its script: run `make notebooks`")
        nb = json.loads(executed.read_text())
        ran = [c for c in nb["cells"] if c["cell_type"] == "code" and c.get("execution_count")]
        if not ran:
            raise SiteError(f"{shown(executed)} was never executed: run `make notebooks`")
        repo_file = f"tutorials/{script.name}"
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"])
                cell["source"] = to_mathml(self.rewrite_links(text, repo_file, html=True))
        nb["cells"].append(
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": f"---\n\nReproduce this page: `python {repo_file}` (the script, with its asserts), "
                "`make notebooks` (this notebook, executed) or `make docs` (this site).",
            }
        )
        self.write(site_path(repo_file), json.dumps(nb, indent=1))

    def copy_assets(self) -> None:
        for repo_file in sorted(self.assets):
            target = self.out / "files" / repo_file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / repo_file, target)

    def source_pages(self) -> None:
        languages = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".txt": "text"}
        for repo_file in sorted(self.sources):
            language = languages.get(Path(repo_file).suffix, "text")
            body = (ROOT / repo_file).read_text()
            self.write(
                source_page(repo_file),
                f'# `{repo_file}`\n\nThe file as it is in the repository.\n\n````{language} linenums="1"\n{body}````\n',
            )

    def folder_listings(self) -> None:
        """An index page for every linked folder that has none (and for the folders inside it)."""
        todo = sorted(self.listings)
        while todo:
            repo_dir = todo.pop()
            folder = listing_folder(repo_dir)
            index = self.out / folder / "index.md"
            if index.exists():
                continue
            lines = [f"# `{repo_dir}/`\n", "The files in this folder of the repository.\n"]
            for p in sorted(p for p in (ROOT / repo_dir).iterdir() if not p.name.startswith(".")):
                if p.is_dir():
                    todo.append(f"{repo_dir}/{p.name}")
                    target = f"{listing_folder(f'{repo_dir}/{p.name}')}/index.md"
                else:
                    target = self.place(f"{repo_dir}/{p.name}")
                lines.append(f"- [{p.name}{'/' if p.is_dir() else ''}]({posixpath.relpath(target, folder)})")
            index.parent.mkdir(parents=True, exist_ok=True)
            index.write_text("\n".join(lines) + "\n")


def stage(out: Path = STAGE) -> Stager:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for folder in ("results", "figures"):
        shutil.copytree(ROOT / "docs" / folder, out / folder)
    stager = Stager(out)
    stager.markdown("README.md")
    stager.markdown("tutorials/README.md")
    for page in sorted((ROOT / "docs").glob("*.md")):
        stager.markdown(f"docs/{page.name}")
    for page in sorted((ROOT / "docs" / "results").rglob("*.md")):
        stager.markdown(page.relative_to(ROOT).as_posix())
    for script in sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py")):
        stager.notebook(script)
    stager.folder_listings()
    stager.source_pages()
    stager.copy_assets()
    return stager


def execute_notebooks(scripts: list[Path] | None = None) -> None:
    """tutorials/NN_*.py -> tutorials/NN_*.ipynb (git-ignored), executed in a Jupyter kernel (the
    ipykernel of this environment), so the notebooks open with their outputs and figures."""
    scripts = scripts or sorted((ROOT / "tutorials").glob("[0-9][0-9]_*.py"))
    NOTEBOOKS.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore:IProgress",  # tqdm's note that ipywidgets is absent
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "WANDB_MODE": "disabled",
        "HF_HUB_OFFLINE": "1",
        "DGLBACKEND": "pytorch",
    }
    env.pop("MPLBACKEND", None)  # the kernel's inline backend draws the figures into the notebook
    for script in scripts:
        started = time.monotonic()
        command = [sys.executable, "-m", "jupytext", "--quiet", "--to", "ipynb", "--execute", str(script)]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SiteError(f"{script.name} failed in the kernel:\n{done.stderr[-3000:]}")
        print(
            f"executed {script.name} -> {(NOTEBOOKS / script.stem).relative_to(ROOT)}.ipynb "
            f"({time.monotonic() - started:.0f} s)"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what",
        choices=["notebooks", "stage", "build"],
        help="notebooks: execute the tutorials; "
        "stage: write build/site_src; build: stage, then mkdocs build -> build/site",
    )
    args = parser.parse_args(argv)
    try:
        if args.what == "notebooks":
            execute_notebooks()
            return 0
        stager = stage()
    except SiteError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"staged {STAGE.relative_to(ROOT)}: {len(stager.sources)} source pages, {len(stager.listings)} folder listings"
    )
    if args.what == "stage":
        return 0
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--quiet", "--config-file", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(mkdocs, cwd=ROOT, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if done.returncode == 0:
        print(
            f"site: {(ROOT / 'build' / 'site' / 'index.html').relative_to(ROOT)} (open it, or "
            "python -m http.server -d build/site 8000 and browse http://localhost:8000)"
        )
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
