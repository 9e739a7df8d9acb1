"""The Results part's pages are what the record files give: no table on them is typed in."""

from book_tools import results
from book_tools.results import ch10_cpu


def test_every_results_page_is_what_its_records_give():
    assert results.main(["--check"]) == 0, "run: python -m book_tools.results"


def test_every_results_page_is_in_the_table_of_contents():
    toc = (results.REPO_ROOT / "_toc.yml").read_text()
    for name in results.PAGES:
        assert f"book/results/{name}" in toc


def test_a_record_says_what_sampled_its_rollouts():
    assert ch10_cpu._sampler({"rl": {}}) == "Hugging Face's `generate`"  # made before records named an engine
    assert "course_lib.lm.decode" in ch10_cpu._sampler({"rl_config": {"engine": "auto"}})
    assert ch10_cpu._sampler({"rl_config": {"engine": "auto"}, "loop": "TRL"}) == "Hugging Face's `generate`"


def test_the_cpu_methods_say_whose_start_each_record_used():
    def record(score, engine=None, reused=None):
        start = {"model": "start", "test_pass_rate": score, **({"from": reused} if reused else {})}
        return {"runs": [start], **({"rl_config": {"engine": engine}} if engine else {})}

    one = [("GRPO", "a.json", record(0.158)), ("TRL", "b.json", record(0.158, reused="notebooks/data/a.json"))]
    title, pairing = ch10_cpu._sampling_note(one)
    assert title.endswith("made with Hugging Face's `generate` sampling") and pairing.startswith("Each trained seed is "
                                                                                                "paired with the one start")
    two = one + [("PPO", "c.json", record(0.125, engine="auto"))]
    title, pairing = ch10_cpu._sampling_note(two)
    assert title == "## Three methods on the CPU" and "GRPO, PPO: each record measured its start" in pairing
    assert "TRL reuses the start of `a.json`" in pairing and "0.125 (PPO) and 0.158 (GRPO, TRL)" in pairing
    same = [("GRPO", "a.json", record(0.158)), ("PPO", "c.json", record(0.158))]
    assert "gap" not in ch10_cpu._sampling_note(same)[1] and "its own record's start" in ch10_cpu._sampling_note(same)[1]
