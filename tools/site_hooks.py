"""mkdocs hooks for the tutorial site (mkdocs.yml ``hooks:``).

Two repairs on every page:

* Equations are MathML already (tools/site.py converts them at staging time), so nbconvert's
  MathJax block is dead weight: a ``<script src="">`` with no URL (the browser fetches the page
  itself again) and a ``text/x-mathjax-config`` script. Both are removed.
* mkdocs-jupyter's table of contents cuts a heading's anchor at its first inline code
  (``#2-the-same-numbers-as`` for the id ``2-the-same-numbers-as-scaled_dot_product_attention``)
  or drops the code from it (``#3-the-rule`` for ``3-the-modelimplauto-rule``). A ``#fragment`` that
  names no id on the page, but whose words appear in order in exactly one id, is pointed at that id.
"""

from __future__ import annotations

import re

EMPTY_SCRIPT = re.compile(r"<script src=\"\">\s*</script>")  # nbconvert's MathJax tag, with no URL given
MATHJAX_CONFIG = re.compile(r"<script type=\"text/x-mathjax-config\">.*?</script>", re.S)


ID = re.compile(r"""\bid=["']([^"']+)["']""")
LOCAL_ANCHOR = re.compile(r'href="#([^"]+)"')


def _subsequence(short: list[str], long: list[str]) -> bool:
    words = iter(long)
    return all(word in words for word in short)  # each word found after the previous one


def repair_anchors(html: str) -> str:
    ids = set(ID.findall(html))

    def one(match: re.Match) -> str:
        fragment = match.group(1)
        if fragment in ids:
            return match.group(0)
        words = fragment.split("-")
        near = [i for i in ids if _subsequence(words, i.split("-"))]
        return f'href="#{near[0]}"' if len(near) == 1 else match.group(0)

    return LOCAL_ANCHOR.sub(one, html)


def on_post_page(output: str, page, config) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    return repair_anchors(EMPTY_SCRIPT.sub("", MATHJAX_CONFIG.sub("", output)))
