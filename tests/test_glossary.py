"""The EN/中文 glossary: every word a chapter links to it is a term, and every term links back."""

from __future__ import annotations

from book_tools import glossary


def test_every_linked_word_is_a_glossary_term():
    unknown = glossary.unmatched_links()
    assert not unknown, f"linked to the glossary but not defined there: {unknown}"


def test_every_term_links_back_to_the_chapters_that_use_it():
    before, entries, after = glossary.read_glossary()
    current = glossary.render(before, glossary.with_backlinks(entries, glossary.chapter_links()), after)
    assert current == glossary.GLOSSARY.read_text(), "run `python -m book_tools sync-glossary`"
    orphans = [e.english for e in entries if not e.chapters]
    assert not orphans, f"terms no chapter links to: {orphans}"


def test_every_term_has_english_and_chinese():
    for entry in glossary.read_glossary()[1]:
        names = " ".join(entry.term_lines)
        assert any("\u4e00" <= ch <= "\u9fff" for ch in names), f"{entry.english}: no Chinese term"
        assert entry.definition, f"{entry.english}: no definition"


def test_terms_are_unique():
    names = [glossary.normalise(e.english) for e in glossary.read_glossary()[1]]
    assert len(names) == len(set(names))


def test_round_trip_and_plural_matching(tmp_path):
    path = tmp_path / "glossary.md"
    path.write_text("# G\n\n```{glossary}\nSplit\n划分\n  Which role a task plays.\n\n"
                    "Token (词元)\n  A piece of text.\n  Chapters: [9](../notebooks/09_x.ipynb).\n```\n")
    before, entries, after = glossary.read_glossary(path)
    assert [e.english for e in entries] == ["Split", "Token"]
    assert entries[1].definition == ["  A piece of text."]  # the old back link is not part of it
    assert glossary.match(entries, "splits") is entries[0]
    assert glossary.match(entries, "Tokens") is entries[1]
    assert glossary.match(entries, "spline") is None
    glossary.with_backlinks(entries, {"splits": ["02_tokenizers"]})
    text = glossary.render(before, entries, after)
    assert "  Chapters: [2](../notebooks/02_tokenizers.ipynb)." in text
    assert "09_x" not in text
