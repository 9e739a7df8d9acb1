"""The rendered book as a reader meets it: built, served, and opened in a real browser.

    python -m book_tools check-book              build the book, open every page in headless Chromium
    python -m book_tools check-links             check the external links (needs the internet; optional)

`check_book` builds the HTML with the same `jupyter-book build -W -n` as ``make book``
(every internal link and cross-reference must resolve, every citation must be in the
bibliography), serves it on 127.0.0.1 the way GitHub Pages serves it, and opens every
page in Chromium, driven by Playwright through ``/usr/bin/chromium``. On each page it
records:

- console errors and failed requests of the book's own files (scripts, styles, images),
- images that did not load,
- mathematics that MathJax did not typeset, or typeset with an error,
- widget views left live on the page (with no kernel they draw nothing; the book shows
  their text form, beside the figure each chapter draws for the default value),
- for chapters, the Colab and Binder launch links and the notebook they point at,

and keeps a screenshot of each page. The book loads MathJax from a public CDN. The
check needs no internet: it serves that URL from the same files fetched once from the
npm registry, and any other request that leaves the machine is reported, so a new
external dependency cannot slip in unnoticed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import http.server
import io
import json
import mimetypes
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from book_tools import REPO_ROOT

CACHE_DIR = REPO_ROOT / ".cache" / "book-assets"
NPM_REGISTRY = os.environ.get("NPM_REGISTRY", "https://registry.npmjs.org")

# URL the book requests -> (npm package tarball, file or folder inside the package).
# A URL ending in "/" maps a whole folder (MathJax loads its fonts relative to its script).
CDN_ASSETS = {
    "https://cdn.jsdelivr.net/npm/mathjax@3/": ("mathjax/-/mathjax-3.2.2.tgz", "package/"),
}
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NOT_PAGES = {"genindex.html", "search.html"}


class BookCheckError(RuntimeError):
    """The book could not be built or checked; the message says what to do."""


# =====================================================================================
# 1. Build
# =====================================================================================

def build_book(out_dir: Path, source: Path = REPO_ROOT) -> Path:
    """Build the HTML book into ``out_dir`` with warnings as errors; return the html folder."""
    jb, env = _jupyter_book()
    out_dir = Path(out_dir)
    proc = subprocess.run([jb, "build", "-W", "-n", "--keep-going", "--path-output", str(out_dir), str(source)],
                          capture_output=True, text=True, env=env)
    html = out_dir / "_build" / "html"
    if proc.returncode != 0 or not (html / "index.html").exists():
        log = (proc.stdout + proc.stderr)[-6000:]
        raise BookCheckError(f"`jupyter-book build -W -n` failed (exit {proc.returncode}); "
                             f"a warning is an error here. The end of its output:\n{log}")
    return html


def _jupyter_book() -> tuple[str, dict]:
    """The jupyter-book executable (the venv's first), and an environment whose PATH finds its tools."""
    jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    if jb is None:
        raise BookCheckError("jupyter-book is not installed: run `bash scripts/setup.sh` (or `make setup`)")
    return jb, {**os.environ, "PATH": str(Path(jb).parent) + os.pathsep + os.environ["PATH"]}


def book_pages(html_dir: Path) -> list[str]:
    """Every page of the book, as paths relative to the html folder (redirect stubs left out)."""
    pages = sorted(str(p.relative_to(html_dir)) for p in html_dir.rglob("*.html")
                   if not any(part.startswith("_") for part in p.relative_to(html_dir).parts)
                   and p.name not in NOT_PAGES and not _is_redirect(p))
    return pages


def _is_redirect(page: Path) -> bool:
    """The root index.html only forwards the reader to the first page."""
    return 'http-equiv="Refresh"' in page.read_text(errors="replace")[:2000]


def toc_files(repo: Path = REPO_ROOT) -> list[str]:
    """The files `_toc.yml` lists (root first), without suffix, e.g. 'notebooks/01_programs_as_tasks'."""
    import yaml

    toc = yaml.safe_load((repo / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


# =====================================================================================
# 2. Serve, with the CDN files from the npm registry
# =====================================================================================

def fetch_cdn_assets(cache_dir: Path = CACHE_DIR) -> Path:
    """Download the CDN scripts the book loads (once) from the npm registry into ``cache_dir``."""
    cache_dir = Path(cache_dir)
    for tarball, _ in CDN_ASSETS.values():
        target = cache_dir / _asset_dir(tarball)
        if (target / ".complete").exists():
            continue
        url = f"{NPM_REGISTRY}/{tarball}"
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except OSError as error:
            raise BookCheckError(f"could not download {url} ({error}); the browser check serves MathJax "
                                 f"from the npm registry's copy. "
                                 f"Set NPM_REGISTRY to a reachable mirror, or place the unpacked packages "
                                 f"in {cache_dir}") from error
        shutil.rmtree(target, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(target, filter="data")
        (target / ".complete").touch()
    return cache_dir


def _asset_dir(tarball: str) -> str:
    return tarball.rsplit("/", 1)[-1].removesuffix(".tgz")


def cdn_file(url: str, cache_dir: Path = CACHE_DIR) -> Path | None:
    """The local copy of a CDN URL the book requests, or None if the URL is not one of them."""
    url = url.split("?", 1)[0].split("#", 1)[0]
    for prefix, (tarball, inside) in CDN_ASSETS.items():
        if url == prefix or (prefix.endswith("/") and url.startswith(prefix)):
            rest = url[len(prefix):] if prefix.endswith("/") else ""
            path = Path(cache_dir) / _asset_dir(tarball) / inside / rest
            return path if path.is_file() else None
    return None


@contextlib.contextmanager
def serve(html_dir: Path):
    """Serve ``html_dir`` on a free loopback port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


# =====================================================================================
# 3. Open every page in Chromium
# =====================================================================================

@dataclasses.dataclass
class PageReport:
    page: str
    title: str = ""
    console_errors: list = dataclasses.field(default_factory=list)
    failed_requests: list = dataclasses.field(default_factory=list)     # the book's own files
    external_requests: list = dataclasses.field(default_factory=list)   # left the machine, not a known CDN file
    broken_images: list = dataclasses.field(default_factory=list)
    images: int = 0
    math: int = 0                    # math elements on the page
    math_typeset: int = 0            # of those, typeset by MathJax without an error
    widgets: int = 0                 # live widget views left on the static page (should be 0)
    launch_links: dict = dataclasses.field(default_factory=dict)   # "colab"/"binder" -> href
    nav_links: list = dataclasses.field(default_factory=list)      # the sidebar's table of contents
    screenshot: str | None = None

    @property
    def problems(self) -> list[str]:
        found = [f"console error: {e}" for e in self.console_errors]
        found += [f"failed request: {r}" for r in self.failed_requests]
        found += [f"request to an unknown external address: {r}" for r in self.external_requests]
        found += [f"image did not load: {src}" for src in self.broken_images]
        if self.math_typeset != self.math:
            found.append(f"{self.math - self.math_typeset} of {self.math} math elements not typeset")
        if self.widgets:
            found.append(f"{self.widgets} live widget view(s): a static page has no kernel to draw them; "
                         f"render their text form (nb_mime_priority_overrides in _config.yml)")
        return found


def chromium_path() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise BookCheckError("no Chromium found: install it with `sudo apt-get install chromium` "
                         "(scripts/setup.sh does this when run as root), or set CHROMIUM to its path")


_PAGE_PROBE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const images = Array.from(document.images);
  await Promise.all(images.filter(i => !i.complete).map(i => new Promise(r => { i.onload = i.onerror = r; })));
  const math = Array.from(document.querySelectorAll('.math'));
  const typeset = math.filter(m => m.querySelector('mjx-container') && !m.querySelector('mjx-merror'));
  const widgets = document.querySelectorAll('script[type="%s"]').length;
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  const nav = Array.from(document.querySelectorAll('nav.bd-docs-nav a.reference')).map(a => a.href);
  return {
    title: document.title,
    images: images.length,
    broken: images.filter(i => i.naturalWidth === 0).map(i => i.getAttribute('src')),
    math: math.length, typeset: typeset.length,
    widgets: widgets,
    colab: links.filter(h => h.includes('colab.research.google.com')),
    binder: links.filter(h => h.includes('mybinder.org')),
    nav: nav,
  };
}""" % WIDGET_MIME


def check_pages(html_dir: Path, *, screenshots: Path | None = None, cache_dir: Path = CACHE_DIR,
                pages: list[str] | None = None) -> list[PageReport]:
    """Open each page of a built book in headless Chromium and report what a reader would see."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        raise BookCheckError("playwright is not installed: run `bash scripts/setup.sh`") from error
    fetch_cdn_assets(cache_dir)
    pages = book_pages(html_dir) if pages is None else pages
    if screenshots is not None:
        Path(screenshots).mkdir(parents=True, exist_ok=True)
    reports = []
    with serve(html_dir) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            for page_path in pages:
                reports.append(_check_page(context, base, page_path, screenshots, cache_dir))
        finally:
            browser.close()
    return reports


def _check_page(context, base: str, page_path: str, screenshots, cache_dir) -> PageReport:
    report = PageReport(page=page_path)
    page = context.new_page()

    def route(route):
        url = route.request.url
        if url.startswith(base) or url.startswith("data:"):
            return route.continue_()
        local = cdn_file(url, cache_dir)
        if local is not None:
            return route.fulfill(path=str(local), headers={"Access-Control-Allow-Origin": "*",
                                                           "Content-Type": _content_type(local)})
        report.external_requests.append(url)
        return route.abort()

    page.route("**/*", route)
    page.on("console", lambda m: report.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: report.console_errors.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: report.failed_requests.append(f"{r.url} ({r.failure})")
            if r.url.startswith(base) else None)
    page.on("response", lambda r: report.failed_requests.append(f"{r.url} (HTTP {r.status})")
            if r.url.startswith(base) and r.status >= 400 else None)
    page.goto(base + page_path, wait_until="load")
    probe = page.evaluate(_PAGE_PROBE)
    report.title = probe["title"]
    report.images, report.broken_images = probe["images"], probe["broken"]
    report.math, report.math_typeset = probe["math"], probe["typeset"]
    report.widgets = probe["widgets"]
    report.nav_links = [urlparse(h).path.lstrip("/") for h in probe["nav"]]
    for kind in ("colab", "binder"):
        if probe[kind]:
            report.launch_links[kind] = probe[kind][0]
    if screenshots is not None:
        shot = Path(screenshots) / (page_path.replace("/", "__").removesuffix(".html") + ".png")
        page.screenshot(path=str(shot), full_page=False)
        report.screenshot = str(shot)
    page.close()
    return report


def _content_type(path: Path) -> str:
    return mimetypes.guess_type(str(path))[0] or "application/octet-stream"


def expected_launch_links(notebook: str, config: dict) -> dict[str, str]:
    """The Colab and Binder URLs a chapter's buttons should carry, from _config.yml."""
    repo = config["repository"]["url"].rstrip("/")
    owner_name = urlparse(repo).path.strip("/")
    branch = config["repository"].get("branch", "main")
    return {
        "colab": f"https://colab.research.google.com/github/{owner_name}/blob/{branch}/{notebook}",
        "binder": f"https://mybinder.org/v2/gh/{owner_name}/{branch}?urlpath=tree/{notebook}",
    }


def save_report(reports: list[PageReport], path: Path) -> None:
    """The reports as JSON, kept beside the screenshots."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps([dataclasses.asdict(r) for r in reports], indent=1))


def check_book(out_dir: Path, *, screenshots: Path | None = None) -> list[PageReport]:
    """Build the book into ``out_dir`` and check every page; returns one report per page."""
    html = build_book(out_dir)
    return check_pages(html, screenshots=screenshots)


# =====================================================================================
# 4. External links (optional: needs the internet)
# =====================================================================================

def check_links(out_dir: Path, source: Path = REPO_ROOT) -> int:
    """Sphinx's linkcheck builder over the book: every external link must answer."""
    jb, env = _jupyter_book()
    proc = subprocess.run([jb, "build", "--builder", "linkcheck", "--path-output", str(out_dir), str(source)],
                          env=env)
    print(f"link report: {Path(out_dir) / '_build' / 'linkcheck' / 'output.txt'}")
    return proc.returncode


# =====================================================================================
# Command line
# =====================================================================================

def add_arguments(parser) -> None:
    parser.add_argument("--out", default="_build/book-check", help="where to build and keep screenshots")
    parser.set_defaults(func=main)


def add_link_arguments(parser) -> None:
    parser.add_argument("--out", default="_build/linkcheck-build", help="where the linkcheck builder writes")
    parser.set_defaults(func=lambda args: check_links(Path(args.out)))


def main(args) -> int:
    out = Path(args.out)
    start = time.perf_counter()
    reports = check_book(out, screenshots=out / "screenshots")
    bad = 0
    for report in reports:
        problems = report.problems
        bad += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {report.page}: {report.images} images, {report.math} math, "
              f"{report.widgets} widgets")
        for problem in problems:
            print(f"       {problem}")
    print(f"{len(reports)} pages checked in {time.perf_counter() - start:.1f} s; {bad} with problems; "
          f"screenshots in {out / 'screenshots'}")
    save_report(reports, out / "report.json")
    return 1 if bad else 0
