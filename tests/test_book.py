"""The rendered book as readers meet it: built with warnings as errors, opened in Chromium.

The browser part needs Chromium (`apt-get install chromium`, which scripts/setup.sh does
as root). Without it these tests are skipped on a workstation and fail in CI. The
screenshots of every page stay in _build/browser-check/ as the build's artifact.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from book_tools import book_check
from book_tools.reproduce import chapter_notebooks

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "_build" / "browser-check"
CONFIG = yaml.safe_load((REPO / "_config.yml").read_text())


def _have_chromium() -> bool:
    try:
        book_check.chromium_path()
        import playwright  # noqa: F401
        return True
    except (book_check.BookCheckError, ImportError):
        return False


needs_browser = pytest.mark.skipif(not _have_chromium() and not os.environ.get("CI"),
                                   reason="Chromium or playwright is missing (scripts/setup.sh installs both)")


@pytest.fixture(scope="module")
def built_book(tmp_path_factory) -> Path:
    return book_check.build_book(tmp_path_factory.mktemp("book"))


@pytest.fixture(scope="module")
def reports(built_book) -> dict[str, book_check.PageReport]:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    found = book_check.check_pages(built_book, screenshots=ARTIFACTS / "screenshots")
    book_check.save_report(found, ARTIFACTS / "report.json")
    return {r.page: r for r in found}


def _html(file: str) -> str:
    return file.removesuffix(".md").removesuffix(".ipynb") + ".html"


# ---- the build ------------------------------------------------------------------------

def test_every_toc_entry_is_built(built_book):
    missing = [f for f in book_check.toc_files() if not (built_book / _html(f)).exists()]
    assert not missing, f"pages in _toc.yml that the build did not write: {missing}"
    assert book_check.book_pages(built_book), "the build wrote no pages"


def test_each_script_appears_once_on_a_page(built_book):
    page = (built_book / "book" / "glossary.html").read_text()
    assert page.count("const THEBE_JS_URL") == 1


def test_a_glossary_link_lands_on_its_entry(built_book):
    import re
    glossary_ids = set(re.findall(r'id="(term-[^"]+)"', (built_book / "book" / "glossary.html").read_text()))
    links = [(notebook.stem, href) for notebook in chapter_notebooks()  # links in the text, not the page's menus
             for href in re.findall(r'href="\.\./book/glossary\.html([^"]*)"><span class="std',
                                    (built_book / "notebooks" / (notebook.stem + ".html")).read_text())]
    assert len(links) > 100, "the chapters link the glossary"
    missing = [(page, href) for page, href in links if href.removeprefix("#") not in glossary_ids]
    assert not missing, f"glossary links that do not land on an entry: {missing[:10]}"


def test_exercise_solutions_are_behind_a_toggle(built_book):
    for notebook in chapter_notebooks():
        page = (built_book / "notebooks" / (notebook.stem + ".html")).read_text()
        solutions = page.count("tag_solution")
        assert solutions >= 2, f"{notebook.name}: {solutions} solutions on the page"
        assert page.count("tag_hide-cell") >= solutions and "togglebutton.js" in page, notebook.name


def test_widgets_render_as_text_on_the_static_page(built_book):
    for notebook in chapter_notebooks():
        page = (built_book / "notebooks" / (notebook.stem + ".html")).read_text()
        assert book_check.WIDGET_MIME not in page, f"{notebook.name}: a live widget view is left on the page"


def test_every_widget_has_a_static_stand_in():
    """A static page has no kernel: every widget needs a text form, and its cell or the cell
    before it must show a static result (a figure, a table, printed text) for its default value.
    Progress bars are not saved at all (course_lib.progress)."""
    seen = 0
    for notebook in chapter_notebooks():
        cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
        for i, cell in enumerate(cells):
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if book_check.WIDGET_MIME not in data:
                    continue
                seen += 1
                text = "".join(data.get("text/plain", ""))
                assert text, f"{notebook.name}: widget output without a text form"
                assert "%|" not in text, f"{notebook.name}: a progress bar was saved: {text[:60]!r}"
                static = [o for c in cells[max(0, i - 1):i + 1] for o in c.get("outputs", [])
                          if o.get("output_type") == "stream" or
                          ({"image/png", "text/html"} & set(o.get("data", {})) and book_check.WIDGET_MIME
                           not in o.get("data", {}))]
                assert static, f"{notebook.name}: nothing static shown in the widget's cell or the cell before"
    assert seen, "no widget found: this test would pass vacuously"


# ---- the browser ----------------------------------------------------------------------

@pytest.mark.slow
@needs_browser
def test_every_page_opens_without_errors(reports):
    problems = {page: r.problems for page, r in reports.items() if r.problems}
    assert not problems, "pages with problems in Chromium:\n" + json.dumps(problems, indent=1)


@needs_browser
def test_every_page_was_opened_and_photographed(reports, built_book):
    assert sorted(reports) == sorted(book_check.book_pages(built_book))
    for page in book_check.toc_files():
        report = reports[_html(page)]
        assert report.title and Path(report.screenshot).stat().st_size > 10_000, page


@needs_browser
def test_images_and_math_are_there(reports):
    assert sum(r.images for r in reports.values()) >= 20
    assert sum(r.math for r in reports.values()) >= 50
    for report in reports.values():
        assert not report.broken_images and report.math_typeset == report.math, report.page


@needs_browser
def test_the_sidebar_reaches_every_chapter(reports):
    nav = reports[_html(book_check.toc_files()[0])].nav_links
    missing = [f for f in book_check.toc_files() if _html(f) not in nav]
    assert not missing, f"not reachable from the table of contents: {missing}"


@needs_browser
def test_launch_buttons_open_the_right_notebook(reports):
    for notebook in chapter_notebooks():
        path = str(notebook.relative_to(REPO))
        report = reports[_html(path)]
        assert report.launch_links == book_check.expected_launch_links(path, CONFIG), path
        assert (REPO / path).exists()


# ---- pieces that need no browser --------------------------------------------------------

def test_cdn_urls_map_to_the_npm_copies(tmp_path):
    folder = tmp_path / "mathjax-3.2.2" / "package" / "es5"
    folder.mkdir(parents=True)
    (folder / "tex-mml-chtml.js").write_text("// mathjax")
    url = "https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"
    assert book_check.cdn_file(url, tmp_path) == folder / "tex-mml-chtml.js"
    assert book_check.cdn_file(url + "?v=1", tmp_path) == folder / "tex-mml-chtml.js"
    assert book_check.cdn_file("https://cdn.jsdelivr.net/npm/mathjax@3/es5/missing.js", tmp_path) is None
    assert book_check.cdn_file("https://example.com/x.js", tmp_path) is None


def test_redirect_stub_is_not_a_page(tmp_path):
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text("<html></html>")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "x.html").write_text("<html></html>")
    assert book_check.book_pages(tmp_path) == ["book/intro.html"]


def test_expected_launch_links_follow_the_config():
    links = book_check.expected_launch_links("notebooks/01_x.ipynb", {
        "repository": {"url": "https://github.com/someone/course/", "branch": "main"}})
    assert links == {"colab": "https://colab.research.google.com/github/someone/course/blob/main/notebooks/01_x.ipynb",
                     "binder": "https://mybinder.org/v2/gh/someone/course/main?urlpath=tree/notebooks/01_x.ipynb"}


def test_missing_chromium_gives_the_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CHROMIUM", raising=False)
    with pytest.raises(book_check.BookCheckError, match="apt-get install chromium"):
        book_check.chromium_path()


def test_publishing_workflow_runs_the_readme_commands():
    readme = (REPO / "README.md").read_text()
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "book.yml").read_text())
    steps = [step.get("run", "") for job in workflow["jobs"].values() for step in job.get("steps", [])]
    for command in ("make test", "make book"):
        assert f"\n{command}" in readme and command in steps, command
    uses = [step.get("uses", "") for job in workflow["jobs"].values() for step in job.get("steps", [])]
    assert any(u.startswith("actions/upload-pages-artifact") for u in uses)
    assert any(u.startswith("actions/deploy-pages") for u in uses)
    assert workflow[True]["push"]["branches"] == ["main"]  # YAML reads the key `on` as True


def test_each_chapter_states_the_time_the_batch_measured():
    from book_tools import reproduce

    timings = json.loads(reproduce.TIMINGS_PATH.read_text())
    table = reproduce.TIMES_PAGE.read_text()
    total = 0.0
    for notebook in chapter_notebooks():
        assert notebook.stem in timings, f"{notebook.name} has no time in {reproduce.TIMINGS_PATH.name}: run the batch"
        seconds = timings[notebook.stem]["seconds"]
        total += seconds
        stated = reproduce.format_duration(seconds)
        markdown = "".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"]
                           if c["cell_type"] == "markdown")
        line = reproduce.TIME_LINE.search(markdown).group(0)
        assert f"**Time on a 2-core CPU:** {stated}," in line, f"{notebook.name}: {line!r} but the batch measured {stated}"
        assert f"| {stated} |" in table and notebook.stem in table
        assert seconds <= reproduce.NOTEBOOK_BUDGET_S, f"{notebook.name} takes {stated}, over the 5-minute budget"
    assert total <= reproduce.BATCH_BUDGET_S
