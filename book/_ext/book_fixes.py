"""Small fixes to the rendered HTML that the browser check (book_tools.book_check) asks for.

sphinx-thebe and sphinx-togglebutton register their inline configuration scripts twice
(once with the file name None, once with ''), so every page declared
`const THEBE_JS_URL` twice and the browser logged "Identifier 'THEBE_JS_URL' has
already been declared". Each page now gets each script once.

A chapter links a glossary term as `[policy](../book/glossary.md)`, a link that works in Jupyter and
Colab too; in the rendered book each such link lands on its entry (`glossary.html#term-Policy`), the term
found from the link's text or title as `book_tools.glossary` matches it (plurals included).
"""

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.nodes import make_refnode


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (getattr(script, "filename", script) or None, tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


class _GlossaryLinks(SphinxPostTransform):
    """A link to the glossary page whose text (or title) names a term points at that term's entry."""
    default_priority = 5  # before MyST's resolver (9) turns the link into one to the top of the page

    def run(self, **kwargs) -> None:
        from book_tools import glossary

        entries = glossary.read_glossary()[1]
        terms = self.env.get_domain("std")._terms  # term, lower case -> (docname, its anchor)
        for xref in list(self.document.findall(addnodes.pending_xref)):
            if (xref.get("refdomain") != "doc" or not xref.get("reftarget", "").endswith("glossary")
                    or xref.get("reftargetid") or not xref.get("refexplicit")):
                continue
            entry = glossary.match(entries, xref.get("title") or xref.astext())
            names = [] if entry is None else [entry.english.lower(), entry.term_lines[0].lower()]
            key = next((name for name in names if name in terms), None)
            if key is None:
                continue  # tests/test_glossary.py fails on such a link
            docname, anchor = terms[key]
            inner = nodes.inline(xref.astext(), "", classes=["std", "std-ref"])
            inner.extend(xref[0].children)
            xref.replace_self(make_refnode(self.app.builder, xref["refdoc"], docname, anchor, inner))


def setup(app):
    app.connect("html-page-context", _unique_scripts, priority=999)  # after every extension added its scripts
    app.add_post_transform(_GlossaryLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

