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


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (getattr(script, "filename", script) or None, tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _glossary_anchors(app, doctree, docname):
    from book_tools import glossary

    entries = glossary.read_glossary()[1]
    terms = app.env.get_domain("std")._terms  # term (lower case) -> (docname, its anchor)
    for ref in doctree.findall(nodes.reference):
        base, _, anchor = ref.get("refuri", "").partition("#")
        if anchor or not base.endswith("glossary.html"):
            continue
        entry = glossary.match(entries, ref.get("reftitle") or ref.astext())
        if entry is not None and entry.english.lower() in terms:
            ref["refuri"] = f"{base}#{terms[entry.english.lower()][1]}"


def setup(app):
    app.connect("html-page-context", _unique_scripts, priority=999)  # after every extension added its scripts
    app.connect("doctree-resolved", _glossary_anchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

