"""The EN/中文 glossary and the chapters that use it, kept in step.

    python -m book_tools sync-glossary      rewrite each entry's "Chapters:" line

A chapter links a term's first use to the glossary: ``[advantage](../book/glossary.md)``,
or, when its words differ from the term, names the term as the link's title:
``[tests](../book/glossary.md "Test case")`` (a reader sees it on hovering).
Each glossary entry ends with a line that links back to every chapter that does so,
``Chapters: [5](../notebooks/05_policy_gradients.ipynb), [6](...)``. This module reads
both sides; `sync_backlinks` writes the back links, and the tests check that every
linked word is a glossary term and that the back links are current.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from book_tools import NOTEBOOKS_DIR as NOTEBOOKS, REPO_ROOT

GLOSSARY = REPO_ROOT / "book" / "glossary.md"
# [words](../book/glossary.md) or, when the words differ from the term, [words](../book/glossary.md "Term")
LINK = re.compile(r'\[([^\]]+)\]\(\.\./book/glossary\.md(?:#[^)\s]*)?(?:\s+"([^"]+)")?\)')
BACKLINK_PREFIX = "Chapters: "


@dataclass
class Entry:
    term_lines: list[str]           # "Task" and "任务", or one line "Token (词元)"
    definition: list[str]           # the indented lines, without the back-link line
    chapters: list[str] = field(default_factory=list)

    @property
    def english(self) -> str:
        return re.sub(r"\s*\(.*\)\s*$", "", self.term_lines[0]).strip()

    def render(self) -> str:
        lines = self.term_lines + self.definition
        if self.chapters:
            links = ", ".join(f"[{c[:2].lstrip('0')}](../notebooks/{c}.ipynb)" for c in self.chapters)
            lines.append(f"  {BACKLINK_PREFIX}{links}.")
        return "\n".join(lines)


def read_glossary(path: Path = GLOSSARY) -> tuple[str, list[Entry], str]:
    """(text before the glossary block, its entries, text after it)."""
    text = path.read_text()
    start = text.index("```{glossary}\n") + len("```{glossary}\n")
    end = text.rindex("```")
    entries, term_lines, definition = [], [], []
    for line in text[start:end].splitlines():
        if not line.strip():
            continue
        if line.startswith(" "):
            if not line.strip().startswith(BACKLINK_PREFIX):
                definition.append(line)
            continue
        if definition:  # a term line after a definition starts the next entry
            entries.append(Entry(term_lines, definition))
            term_lines, definition = [], []
        term_lines.append(line)
    if term_lines:
        entries.append(Entry(term_lines, definition))
    return text[:start], entries, text[end:]


def normalise(words: str) -> str:
    return " ".join(words.lower().split())


def _candidates(words: str) -> list[str]:
    """A linked word and its singular forms ("splits" -> "split", "bootstrapped" stays)."""
    words = normalise(words)
    found = [words]
    for suffix, replacement in (("ies", "y"), ("es", ""), ("s", "")):
        if words.endswith(suffix):
            found.append(words[: -len(suffix)] + replacement)
    return found


def chapter_links(notebooks_dir: Path = NOTEBOOKS) -> dict[str, list[str]]:
    """Linked words -> chapters (notebook stems) whose markdown links them to the glossary."""
    links: dict[str, list[str]] = {}
    for notebook in sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for words, title in LINK.findall("".join(cell["source"])):
                chapters = links.setdefault(normalise(title or words), [])
                if notebook.stem not in chapters:
                    chapters.append(notebook.stem)
    return links


def match(entries: list[Entry], words: str) -> Entry | None:
    by_name = {normalise(e.english): e for e in entries}
    for candidate in _candidates(words):
        if candidate in by_name:
            return by_name[candidate]
    return None


def unmatched_links(entries: list[Entry] | None = None, links: dict | None = None) -> dict[str, list[str]]:
    """Linked words that are not glossary terms, with the chapters that link them."""
    entries = read_glossary()[1] if entries is None else entries
    links = chapter_links() if links is None else links
    return {words: chapters for words, chapters in links.items() if match(entries, words) is None}


def with_backlinks(entries: list[Entry], links: dict[str, list[str]]) -> list[Entry]:
    for entry in entries:
        entry.chapters = []
    for words, chapters in links.items():
        entry = match(entries, words)
        if entry is not None:
            entry.chapters = sorted(set(entry.chapters) | set(chapters))
    return entries


def render(before: str, entries: list[Entry], after: str) -> str:
    return before + "\n\n".join(e.render() for e in entries) + "\n" + after


def sync_backlinks(path: Path = GLOSSARY, notebooks_dir: Path = NOTEBOOKS) -> bool:
    """Rewrite the glossary's back links; True if the file changed."""
    before, entries, after = read_glossary(path)
    text = render(before, with_backlinks(entries, chapter_links(notebooks_dir)), after)
    changed = text != path.read_text()
    if changed:
        path.write_text(text)
    return changed


def main(args) -> int:
    changed = sync_backlinks()
    unknown = unmatched_links()
    print(f"glossary: back links {'rewritten' if changed else 'already current'}")
    for words, chapters in sorted(unknown.items()):
        print(f"glossary: '{words}' is linked by {', '.join(chapters)} but is not a glossary term")
    return 1 if unknown else 0
