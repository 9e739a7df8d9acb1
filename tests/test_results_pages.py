"""The Results part's pages are what the record files give: no table on them is typed in."""

from book_tools import results


def test_every_results_page_is_what_its_records_give():
    assert results.main(["--check"]) == 0, "run: python -m book_tools.results"


def test_every_results_page_is_in_the_table_of_contents():
    toc = (results.REPO_ROOT / "_toc.yml").read_text()
    for name in results.PAGES:
        assert f"book/results/{name}" in toc


def test_a_record_says_what_sampled_its_rollouts():
    assert results._sampler({"rl": {}}) == "Hugging Face's `generate`"  # made before records named an engine
    assert "course_lib.lm.decode" in results._sampler({"rl_config": {"engine": "auto"}})
    assert results._sampler({"rl_config": {"engine": "auto"}, "loop": "TRL"}) == "Hugging Face's `generate`"
