"""Small fixes to the rendered HTML that the browser check (book_tools.book_check) asks for.

sphinx-thebe and sphinx-togglebutton register their inline configuration scripts twice
(once with the file name None, once with ''), so every page declared
`const THEBE_JS_URL` twice and the browser logged "Identifier 'THEBE_JS_URL' has
already been declared". Each page now gets each script once.
"""


def _unique_scripts(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (getattr(script, "filename", script) or None, tuple(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _unique_scripts, priority=999)  # after every extension added its scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}

