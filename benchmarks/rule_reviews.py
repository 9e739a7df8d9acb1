"""Reviews of one change to code that many records depend on, with the reviews record by record in
benchmarks/still_valid.py: for each change, the records it touched, the definitions that changed under them (with the
fingerprints they were reviewed at) and why the records still hold. add(still_valid) lays them over that table."""




def _review(still_valid: dict[str, dict], name: str, reason: str, reviewed: dict[str, str]) -> None:
    """Lay one change's review over the entry of notebooks/data/NAME.json: its reason joins the entry's (after a
    "; "), its definitions (name -> the fingerprint reviewed) join the entry's."""
    entry = still_valid.setdefault(f"notebooks/data/{name}.json", {"reason": "", "reviewed": {}})
    entry["reason"] = "; ".join(filter(None, (entry["reason"], reason)))
    entry["reviewed"] = {**entry["reviewed"], **reviewed}


def _one_rule(still_valid: dict[str, dict]) -> None:
    # One rule for reusing a run or extending a record (_common.made_here_by_this_code), reviewed on 2026-11-28: each
    # record below gets the definitions of it that changed under it, and the reasons for those
    _ONE_RULE = {"benchmarks/_common.py::reuse_or_clear": "88ec94285d6e",
                 "benchmarks/gru_study.py::run_one": "da98898a08ce", "benchmarks/gru_study.py::parse": "016104da2817",
                 **{f"benchmarks/smollm2_rl.py::{name}": fingerprint for name, fingerprint in (
                     ("start_rows", "8c2fea6b10b3"), ("run", "7f4be5e79834"), ("parse", "466b456cf468"),
                     ("_remake_args", "07b8bd6c823a"), ("read_study", "99783f3f8628"))}}
    _ONE_RULE_REASONS = {
        "_common": "_common.reuse_or_clear now asks _common.made_here_by_this_code (the same commit with nothing uncommitted "
                   "then or now, the same machine, the same torch, and a commit at all), so it also writes the machine "
                   "and torch into a run's made_at.json and says why it makes a finished run again: which runs are made "
                   "again, not what a run computes",
        "gru_study": "gru_study refuses --seeds or --variants that list a value twice, takes its record's path from "
                     "_common.record_path (notebooks/data/NAME.json, the same path) and says in its reuse message that "
                     "the run was made here: every run gets the same PPOConfig as before",
        "smollm2_rl": "the language model's runner asks _common.made_here_by_this_code where it kept its own copy of the "
                      "rule, extends a record when the record's config equals the settings it would run with (the keys it "
                      "compared one by one before) and takes record paths from _common.record_path (the same paths): which "
                      "seeds are run again, not what a run computes; what the scripts that import it use (MODEL, LORA, RL, "
                      "REPO_ROOT, summarise) is unchanged"}
    for name, parts in {**dict.fromkeys(("explore_ablation", "gru_methods", "lambda_ablation", "teacher_ablation"),
                                          ("_common", "gru_study")),
                          **dict.fromkeys(("reward_ablation", "scoring_benchmark", "smollm2_gpu_seeds_long"), ("_common",)),
                          "smollm2_gpu_engines": ("smollm2_rl",),
                          **dict.fromkeys(("smollm2_ppo", "smollm2_reinforce", "smollm2_step_time"),
                                          ("_common", "smollm2_rl"))}.items():
        _review(still_valid, name, "; ".join(_ONE_RULE_REASONS[p] for p in parts),
                {k: v for k, v in _ONE_RULE.items() if k.split("::")[0].split("/")[-1][:-3] in parts})


def _kl_name(still_valid: dict[str, dict]) -> None:
    # One name per measure, reviewed on 2026-11-28: PPOConfig's target_kl help says "approximate KL" where it said
    # "approx-KL"; the help text of an option, not what a run computes
    _KL_NAME = {"course_lib/gru/ppo_config.py::PPOConfig": "d35ce7baa58f"}
    _KL_NAME_REASON = ("PPOConfig's target_kl help names the measure 'approximate KL' (it said 'approx-KL'): the text of "
                       "the option's help, the same settings and defaults")
    for name in ("explore_ablation", "gru_methods", "lambda_ablation", "ppo_from_copying_start", "reward_ablation",
                  "teacher_ablation"):
        _review(still_valid, name, _KL_NAME_REASON, _KL_NAME)


def _not_code_files(still_valid: dict[str, dict]) -> None:
    # The staleness check and its reviews split from schema.py, reviewed on 2026-11-28: _common.code_state leaves
    # them out of the uncommitted changes it reports, as it left out schema.py (NOT_CODE_FILES)
    _NOT_CODE_FILES = {"benchmarks/_common.py::NOT_CODE_FILES": "4ad48d95e91d",
                       "benchmarks/_common.py::code_state": "7ba96c3909f3"}
    _NOT_CODE_FILES_REASON = ("_common.code_state leaves benchmarks/staleness.py and still_valid.py (the staleness check and "
                              "these reviews, split from schema.py) out of the uncommitted changes it reports, as it left "
                              "out schema.py and experiments.toml (NOT_CODE_FILES, built from staleness.NOT_CODE): the "
                              "record's header, not what a run computes")
    for name, keys in {**dict.fromkeys(("generation_throughput", "smollm2_cpu_seeds", "smollm2_gpu_engines",
                                          "variants_pretraining", "ppo_benchmark"), ("NOT_CODE_FILES",)),
                         **dict.fromkeys(("engine_candidates", "explore_ablation", "gru_methods", "lambda_ablation",
                                          "llm_rl_benchmark", "ppo_from_copying_start", "reward_ablation",
                                          "scoring_benchmark", "smollm2_gpu_seeds_long", "smollm2_ppo",
                                          "smollm2_reinforce", "smollm2_step_time", "teacher_ablation",
                                          "teacher_grpo_benchmark"), ("NOT_CODE_FILES", "code_state"))}.items():
        _review(still_valid, name, _NOT_CODE_FILES_REASON,
                {f"benchmarks/_common.py::{k}": _NOT_CODE_FILES[f"benchmarks/_common.py::{k}"] for k in keys})


def _engine_split(still_valid: dict[str, dict]) -> None:
    # engine_candidates.py (941 lines) split by role, reviewed on 2026-11-28: its definitions moved unchanged into
    # engine_setup.py (settings, rows, Candidate), engine_gguf.py (GGUF files, llama.cpp) and engine_workers.py (the
    # worker processes); what is new is the plumbing of a module run on its own
    _review(still_valid, "engine_candidates", (
        "its definitions moved unchanged out of the script into engine_setup.py, engine_gguf.py and engine_workers.py; "
        "new are engine_setup's sys.path entry for course_lib (the script's own, now where a worker process imports it "
        "first) and engine_workers' start of a worker process (`--worker NAME WORKDIR`, as the script's main started it, "
        "now in the file Worker starts: Worker's __file__ is engine_workers.py); main no longer starts a worker; "
        "LlamaCpp's `global _LOG_SINK` names the module variable that moved with it into engine_gguf.py"), {
        "benchmarks/engine_setup.py::statement aa8862d66571": "aa8862d66571",
        "benchmarks/engine_workers.py::statement 9d2b94d4ed1c": "9d2b94d4ed1c",
        "benchmarks/engine_candidates.py::main": "496f028b4a14",
        "benchmarks/engine_gguf.py::LlamaCpp": "e7eb14597e77",
        "benchmarks/engine_workers.py::Worker": "452101930842"})


def _labels_and_seeds(still_valid: dict[str, dict]) -> None:
    # Reviewed on 2026-11-28: the training figure's panel says "approximate KL" (it said "approx KL"), the text of a label;
    # the language model's runner refuses a seed listed twice, as gru_study does (it ran each once: these records' seeds
    # are different)
    _PANEL_NAME = {"course_lib/plots.py::PANELS": "b399c48f1575"}
    _PANEL_NAME_REASON = "plots.PANELS labels the KL panel 'approximate KL (nats)' (it said 'approx KL'): a figure's label"
    _LM_SEEDS_ONCE = {"benchmarks/smollm2_rl.py::parse": "91fe5254bfd7"}
    _LM_SEEDS_ONCE_REASON = ("smollm2_rl's parse refuses --seeds listing a value twice, where it ran each once: a command "
                             "it ran is refused only if it listed a seed twice, and this record's seeds are different")
    for names, review, reason in (
            (("explore_ablation", "gru_methods", "lambda_ablation", "ppo_benchmark", "ppo_from_copying_start",
              "reward_ablation", "teacher_ablation"), _PANEL_NAME, _PANEL_NAME_REASON),
            (("smollm2_gpu_engines", "smollm2_ppo", "smollm2_reinforce", "smollm2_step_time"), _LM_SEEDS_ONCE,
             _LM_SEEDS_ONCE_REASON)):
        for name in names:
            _review(still_valid, name, reason, review)


def _long_run_sessions(still_valid: dict[str, dict]) -> None:
    # The long GPU run over several sessions (smollm2_gpu_long.py --state, smollm2_gpu_seeds.py --resumable),
    # reviewed on 2026-11-28: without those options a run takes the path it took
    _LONG = {f"benchmarks/smollm2_gpu_long.py::{name}": fingerprint for name, fingerprint in (
        ("parse", "722b1d19883d"), ("CURVE_KEYS", "f4f468dce94d"), ("train_until", "1fd7a97c0767"),
        ("load", "d10a7d89414e"), ("main", "e9027fe829b7"))}
    _SEEDS = {f"benchmarks/smollm2_gpu_seeds.py::{name}": fingerprint for name, fingerprint in (
        ("run_seeds", "2c2f7e1863e7"), ("one_format_rows", "2c845b9eaed1"), ("unfinished_seeds", "b0bba77806ab"),
        ("main", "3338f82e2820"))}
    _review(still_valid, "smollm2_gpu_engines", (
        "smollm2_gpu_long.py, whose RL_LONG (unchanged) this benchmark reads, gained --state (a run over several "
        "sessions) and its main's loading and timed evaluation became the functions load and timed_measure, the same "
        "statements; train_until builds the curve from the trainer's history (curve_of, the same keys and steps)"),
            _LONG)
    _review(still_valid, "smollm2_gpu_seeds_long", (
        "smollm2_gpu_seeds.py gained --resumable (each seed's trainer state kept in --work, partial records not merged); "
        "without it run_seeds starts the same command per seed and writes its log afresh, main merges as before, and "
        "one_format_rows adds a seed's sessions only where its record lists them (this record's do not)"), _SEEDS)


def add(still_valid: dict[str, dict]) -> None:
    """Add each change's reviews to still_valid's entries (record path -> {"reason", "reviewed"})."""
    for review in (_one_rule, _kl_name, _not_code_files, _engine_split, _labels_and_seeds, _long_run_sessions):
        review(still_valid)
