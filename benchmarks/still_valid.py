"""Records whose code changed since their code_revision, but which still hold, reviewed (benchmarks/staleness.py
decides what changed): STILL_VALID.

Each entry: the record's path -> why it still holds, and each changed definition ('path::name' as
staleness.changed_since names it) with the fingerprint it was reviewed at (a tuple: each of several versions
reviewed). To review: `python benchmarks/schema.py --changed RECORD` prints each changed definition beside its
text at the record's commit. A definition changed again after its review fails the test again.
"""

_MOVED = {  # 7aa8d29, course_lib by role (core/, gru/, lm/, cli/)
    "course_lib/lm/llm.py::REPO_ROOT": "60d68bf188c7",
    "course_lib/runs.py::check_record_made_from": "6f40117e8631",
}
_MOVED_REASON = ("REPO_ROOT is parents[2] because llm.py moved one folder down (the same folder); "
                 "check_record_made_from changed only its error message")
_LEFT_PADDED = {  # 51a4a98: one left-padding helper (behaviour unchanged)
    "course_lib/lm/decode.py::left_padded": "eef8ca127588",
    "course_lib/lm/decode.py::sample": "358392e4225e",
    "course_lib/lm/evaluation.py::_hf_writer": "2c1cb548ed44",
}
_LEFT_PADDED_REASON = ("decode.left_padded builds the same left-padded ids and mask that sample (pad 0) and _hf_writer "
                       "(the tokenizer's pad) built inline before")
_METHOD_TABLE = {  # the RL core's method table: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/core/rl.py::Method": "f718ba496e07",
    "course_lib/core/rl.py::METHODS": "82b6f7df8542",
    "course_lib/core/rl.py::kl_weight": "fafbc8336ba1",
    "course_lib/core/rl.py::with_kl_weight": "cba584c8b545",
    "course_lib/core/rl.py::RLSettings": "89351ddf2cde",
    "course_lib/lm/llm_rl.py::METHODS": "87d8cb60f8bc",
    "course_lib/lm/llm_rl.py::LMTrainer": "ea74f8a40362",
    # e3650a4fbd33: 7aa8d29's (the engine option's help names fast-bf16); 13ffd34c9ba5: with the method table
    "course_lib/lm/llm_rl.py::RLConfig": ("e3650a4fbd33", "13ffd34c9ba5"),
}
_METHOD_TABLE_REASON = (
    "the method table (core.rl.Method/METHODS) replaces METHOD_PARTS, KL_METHODS and the language model's kl_coef "
    "override of 0.05: for grpo it gives the same parts (group advantages, normalised; the clipped loss; no critic; "
    "no teacher terms) and, with kl_coef=0.05 as the record's settings give it, the same KL weight, 0.05")
_RENAMED = {  # one name per shared setting: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/config.py::RENAMED": "4b324de32f4e",
    "course_lib/config.py::renamed": "01871786d718",
    "course_lib/config.py::coerce": "7e72754e71d4",
    "course_lib/config.py::Config": "4ae853f7023f",
    # c271b5115c70: rollout_splits read by config.coerce, the parser of every tuple option, not a copy of it
    # 3384048909f5 / 2e4dc789556f: a setting the method does not read (unused) is refused away from its default;
    # these records' settings (grpo; gae_lambda, vf_coef, min_std at their defaults) pass, and run as before
    "course_lib/core/rl.py::RLSettings": ("f8a008103ad9", "c271b5115c70", "3384048909f5"),
    "course_lib/lm/llm_rl.py::ROLLOUT_SPLITS": "e1801d47381c",
    "course_lib/lm/llm_rl.py::RLConfig": ("b75dd38ebea6", "2e4dc789556f"),
    "course_lib/lm/llm_rl.py::rollout": "8c023c203952",
    "course_lib/lm/llm_rl.py::LMTrainer": "07a81faffa62",
}
_RENAMED_REASON = (
    "a rename with the same defaults: RLConfig's timeout, clip_norm and splits are RLSettings' sandbox_timeout, "
    "max_grad_norm and rollout_splits (2.0 s, 1.0, train and val as before), group_size moved to RLSettings with "
    "the same default (4) and check, and rollout and LMTrainer read the new names; config.RENAMED reads a stored "
    "config's old names as the new ones, and coerce splits a tuple option's items on commas too (a list of names "
    "without commas reads as before)")
_STEP_INFO = {  # the step's context as a dataclass: reviewed on 2026-11-27
    "course_lib/core/rl.py::StepInfo": "4a958eab2d33",
    "course_lib/core/rl.py::Trainer": "3cc335d0b8a8",
    "course_lib/lm/llm_rl.py::LMStep": "106345003c73",
    "course_lib/lm/llm_rl.py::LMTrainer": "04c18d859c37",
}
_STEP_INFO_REASON = (
    "what collect() hands the step's other parts is a dataclass (rl.StepInfo; the language model's LMStep: teacher, "
    "own, times) instead of a dict with the same keys; Trainer.step runs the same calls in the same order, and "
    "learn moved to core/update.py unchanged")
_ONE_SCORER = {  # one evaluator for both policies: reviewed in the working tree on 2026-11-27, before it was committed
    "course_lib/lm/evaluation.py::evaluate": "de12074d14f4",
    "course_lib/scoring.py::UNREADABLE": "34230280ea56",
    "course_lib/scoring.py::score": "ae651c80e47c",
    "course_lib/scoring.py::_reports": "50d18313524f",
    "course_lib/scoring.py::_mean": "59d9c96243ce",
}
_ONE_SCORER_REASON = (
    "evaluate writes the same completions with the same generate calls (greedy, then n_samples samples: the same "
    "seed and order) and scoring.score runs them in the sandbox as run_completions did and computes the same "
    "numbers, rounded to 4 places; only names changed ({group}_pass_rate, pass@1 from n samples, is "
    "{group}_pass@1), pass_at_k moved to scoring unchanged, and the per-task rows keep greedy_passed, n and c")
_CHUNKED = {  # the learner scores rows of similar length together: reviewed on 2026-11-27
    "course_lib/lm/llm_rl.py::RLConfig": "281f12473cc4",
    "course_lib/lm/llm_rl.py::rollout": "ac551939b2f4",
    "course_lib/lm/llm_rl.py::LMTrainer": "10ff7004bffa",
    "course_lib/lm/lm_policy.py::LEARNER_DTYPES": "14a97f192dfd",
    "course_lib/lm/lm_policy.py::LMActor": "f5695b74e301",
    "course_lib/lm/lm_policy.py::length_chunks": "6af92612feab",
}
_CHUNKED_REASON = (
    "LMActor scores rows of similar length together (length_chunks; score_tokens, 1024 tokens a pass on a CPU by "
    "default): the same log-probabilities, values and gradients as the one padded pass this record ran, up to float32 "
    "rounding (tests/test_rl_core.py compares them with one pass), so a rerun differs only where that rounding changes "
    "a later sample; learner_dtype is a new option whose default, float32, is what this record ran, and RLConfig, "
    "rollout and LMTrainer only hand the two settings to LMActor")
_ONE_LEARNER = {  # one builder of the learner's LMActor: reviewed on 2026-11-27
    "course_lib/lm/llm_rl.py::learner": "8da1d2ab92c4",
    "course_lib/lm/llm_rl.py::rollout": "f9cf61ea3432",
    "course_lib/lm/llm_rl.py::LMTrainer": "d6331b69ac35",
}
_ONE_LEARNER_REASON = (
    "rollout and LMTrainer build their LMActor through llm_rl.learner, with the arguments each passed to LMActor "
    "itself before (temperature, value head, score_tokens, learner_dtype)")
_HEADER_ARGS_REASON = ("new_record (benchmarks/_common.py) now takes the runs' threads and the script's arguments, which "
                       "the script set on the header after new_record before: the same fields with the same values")
_ENGINE_ON_ANY_DEVICE = {  # the fast engine runs where the policy is: reviewed on 2026-11-28
    "course_lib/lm/decode.py::Snapshot": "51d2cba01074",
    "course_lib/lm/decode.py::_Batch": "95471db0baa3",
    "course_lib/lm/decode.py::sample": "00f928bf170e",
    "course_lib/lm/decode.py::forced_logits": "0c4c09cd43f1",
    "course_lib/lm/evaluation.py::_fast_writer": "59228d0a5209",
}
_ENGINE_ON_ANY_DEVICE_REASON = (
    "the fast engine makes its buffers and draws its tokens on the policy's device (a GPU too) and reads each step's "
    "tokens and log-probabilities to the host in one copy instead of one per row: on a CPU the same ids, finishes and "
    "log-probabilities bit for bit (16 sampled rows of SmolLM2 at T = 0.8 compared with the code before), in about 18% "
    "less time on that call, so the record's fast-engine speeds are, if anything, low")
_FAST_ON_ANY_DEVICE = {  # sampling's default engine is the fast one on a GPU too: reviewed on 2026-11-28
    "course_lib/lm/evaluation.py::pick_engine": "abe125084d8d",
    "course_lib/lm/llm_rl.py::RLConfig": "3014db65aef3",
}
_FAST_ON_ANY_DEVICE_REASON = (
    "pick_engine's default for sampling is now the fast engine on a GPU as well as on a CPU (RLConfig.engine's help "
    "says so): on a CPU, where this record ran or where it named its engines, the same choice as before")
_KL_TO_LEARNER = {"course_lib/lm/decode.py::kl_to_learner": "25cf8a28a4ef",
                  "course_lib/lm/decode.py::token_kl": "8dc25cf87243"}  # reviewed on 2026-11-28
_KL_TO_LEARNER_REASON = (
    "decode.kl_to_learner is the per-token KL(sampler || learner) that the benchmarks computed inline, moved into the "
    "library (tests/test_decode.py checks it against the test's own computation); nothing that samples or learns "
    "calls it; its last three lines are decode.token_kl now, the same operations in the same order")
_ONE_FOLDER_REASON = ("OUTPUT names the folder the record now lives in, notebooks/data/ (the one records folder, where "
                      "the record was moved unchanged): where the script writes it, not what it writes")
_LEGEND_REASON = ("SPLIT_ROLES is the text of the legend under a results table (val's reference solutions, not "
                  "its own passing programs, are never trained on): words printed beside results, no result")
_LEGEND = {"course_lib/tasks/core.py::SPLIT_ROLES": "e166268baf05"}  # reviewed on 2026-11-28
_ONE_MASK_REASON = ("the environment's action mask (env.alphabet_mask) and the sampler's (models.next_token_mask) are "
                     "both made by tokenizers.id_mask now: the same masks, element for element and dtype for dtype "
                     "(checked on the course alphabet, all ids and a short list)")
_ONE_MASK = {"course_lib/tokenizers.py::id_mask": "202e32478830",
             "course_lib/gru/env.py::alphabet_mask": "a05c8859f96f",
             "course_lib/gru/models.py::next_token_mask": "286a2e6abc80"}  # reviewed on 2026-11-28
_TAKE_TURNS_REASON = ("its tries are timed by _common.take_turns and the fastest kept by _common.fastest (reviewed on "
                      "2026-11-28): the same contenders in the same order, the same number of tries and the same "
                      "choice of the least seconds, written once for every timing benchmark")
_ONE_SAMPLER_REASON = ("models.decode is the GRU's one writing loop: generate_ids (every row fed each step) and "
                       "actor.collect_rollout (finished rows leave the batch) call it with their own rules for choosing "
                       "a token; the same ids, log-probabilities, values, masks, rewards, bootstraps and episodes bit "
                       "for bit (3 random GRUs, greedy, T = 1 and T = 0.7 with a mask, rollouts of 5 and 40 tokens "
                       "with bootstrapped cut-off rows, compared with the code before)")
_ONE_SAMPLER = {"course_lib/gru/models.py::Decoded": "65e725acda7a", "course_lib/gru/models.py::decode": "74be8e050d4c",
                "course_lib/gru/models.py::generate_ids": "78435be56b06"}  # reviewed on 2026-11-28
# benchmarks/ modules a script imports (_common.py, another script), followed by the staleness check since 2026-11-28
# (it had followed course_lib and the script alone): their changes since each record was made, reviewed that day
_COMMON_HEADER = {"benchmarks/_common.py::machine": "8cbd267abd21", "benchmarks/_common.py::provenance": "5fa1ac550882"}
_COMMON_HEADER_REASON = ("_common's machine and provenance write a record's header, not what a run computes: machine "
                         "names the processor as 'cpu (MODEL), N cores' (a GPU first where there is one), and "
                         "provenance now names it so where it wrote 'MODEL, N cores'")
_CODE_STATE = {"benchmarks/_common.py::new_record": "7994848a3285", "benchmarks/_common.py::code_state": "47345f205a98"}
_CODE_STATE_REASON = ("_common's new_record and code_state write a record's header, not what a run computes: since "
                      "this record new_record may have gained the command's arguments and the runs' threads, and "
                      "now takes the code_state the runs were made at where the caller gives it (code=); code_state "
                      "now counts uncommitted changes in benchmarks/ too (an untracked file only if it is .py or "
                      ".toml), and COURSE_CODE_REVISION where that is set")
_TIMING = {"benchmarks/_common.py::fastest": "e8000eb4a566"}
_TIMING_REASON = ("_common's fastest, the choice of the least seconds among a contender's tries, was added after this "
                  "record (where this record's script calls it, its own review says so)")
_REUSE = {"benchmarks/_common.py::reuse_or_clear": "b9da2a22b0f9"}
_REUSE_REASON = ("_common's reuse_or_clear now also keeps the settings a run is made with in its made_at.json and "
                 "reuses a run only with the same settings: which runs are made again, not what a run computes; "
                 "every run of this record was made afresh by the code at its commit")
_GRU_STUDY_REUSE = {"benchmarks/gru_study.py::run_one": "0a7f49ad78d7",
                    "benchmarks/gru_study.py::parse": "a34dbee10f1f", "benchmarks/gru_study.py::main": "0400491ada51"}
_GRU_STUDY_REUSE_REASON = ("gru_study gives reuse_or_clear each run's settings and the start's SHA-256, the check "
                           "of the runs' made_at.json (now _common.made_by) compares only the code they were made "
                           "by, and parse reads the options where main did "
                           "(the same values: tests/test_studies.py); every run gets the same PPOConfig as before")
_COMMON_GRU_NAMES = {"benchmarks/_common.py::statement 53f107c8bc9a": "53f107c8bc9a",
                     "benchmarks/_common.py::_GRU_RECORD_ROW": "834039945062"}
_COMMON_GRU_NAMES_REASON = ("_common's _GRU_RECORD_ROW, added after this record, is the table of names by which its "
                            "GRU helpers name a GRU evaluation's greedy results (this language-model record reads "
                            "none), and its import of schema's header names works as a package and as a script alike")
_GENERATION_THROUGHPUT_SCRIPT = {  # reviewed on 2026-11-28
    "benchmarks/generation_throughput.py::main": "01c0060c9c31",
    "benchmarks/generation_throughput.py::measure": "dc670a1bbdac",
    "benchmarks/generation_throughput.py::int8_mismatch": "f909638d9f85",
    "benchmarks/generation_throughput.py::OUTPUT": "f989f506950a"}
_LM_STUDY_RUNNER = {  # reviewed on 2026-11-28
    **{f"benchmarks/smollm2_rl.py::{name}": fingerprint for name, fingerprint in (
        ("LOOPS", "cce1cfa7de02"), ("STUDIES", "4e8db7c5517a"), ("STUDY_KEYS", "1b833646635a"),
        ("SUMMARY_KEYS", "82ebd64e269b"), ("main", "5829c9e8b569"), ("parse", "96d4cc795e83"), ("run", "6592d1f864e4"),
        ("run_settings", "36c909d63a1d"), ("save", "1001c2f89902"), ("start_rows", "7e6fe6f0b6e1"),
        ("statement 85d88cdd4da2", "85d88cdd4da2"), ("_remake_args", "765a1481dfca"))}}
_LM_STUDY_RUNNER_REASON = ("smollm2_rl.py became the runner of the language model's study files (benchmarks/studies/lm/): "
                           "what it added or changed (the study's reading and checks, parse, run, save, start_rows, "
                           "main, run_settings' rl_config) runs only when it is the script; the scripts that import "
                           "it use its constants (MODEL, LORA, RL, REPO_ROOT) and its summarise, unchanged")
_COMMAND_ARGS = {"benchmarks/_common.py::command_args": "44b451a04744", "benchmarks/gru_study.py::record": "c360c8914a65",
                 "benchmarks/gru_study.py::read_study": "a165710453e4"}
_COMMAND_ARGS_REASON = ("gru_study's _command_args moved to _common as command_args (the same lines, the repository "
                        "root found from _common's folder, the same one), so that the language model's runner uses it "
                        "too, and writes an output option's path from the root even before the file exists; main "
                        "calls it there, record names its parameter `arguments`, and _common.made_by, where gru_study's made_at moved (the same "
                        "check of every run's made_at.json, so that ppo_benchmark makes it too); read_study reads "
                        "the file and checks the keys, name and seeds every study shares by _common.read_study_file "
                        "(the same checks and messages; tests/test_studies.py names each mistake), then its variants")
_LM_REUSE_RULES = {  # reviewed on 2026-11-28
    "benchmarks/smollm2_rl.py::run": "6592d1f864e4", "benchmarks/smollm2_rl.py::start_rows": "7e6fe6f0b6e1",
    "benchmarks/smollm2_rl.py::main": "5829c9e8b569", "benchmarks/smollm2_rl.py::_remake_args": "765a1481dfca", "benchmarks/smollm2_rl.py::parse": "96d4cc795e83",
    "benchmarks/smollm2_rl.py::save": "1001c2f89902"}
_LM_REUSE_RULES_REASON = ("run, start_rows and their helpers now extend a record (every setting the same), or reuse "
                          "another's start (the same model and evaluation settings), only when it was made by this "
                          "code on this machine with this torch; this record was "
                          "made afresh at its commit, its start measured by its own run (the record it could take "
                          "it from was made by other code); _remake_args writes the command from the seeds the "
                          "record holds, here the study's, so the command is the one it ran; the study file's "
                          "comments changed, not its settings; parse passes each seed once, and save summarises a "
                          "measure only where every trained row has it (here every row has every measure); _common.command_args also writes an output "
                          "option's path from the root before the file exists (this record's command names none), "
                          "and read_study_file refuses a seed listed twice (this study lists three different ones)")
STILL_VALID: dict[str, dict] = {
    "notebooks/data/engine_candidates.json": {
        "reason": "kl_rows and llama_update compute their per-token KL by decode.token_kl, the operations they wrote "
                  "out inline (float32 log-softmax at T of both logits, then sum p_s (log p_s - log p_t)); "
                  + _KL_TO_LEARNER_REASON
                  + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON,
        "reviewed": {**_CODE_STATE, **_TIMING, **_KL_TO_LEARNER, "benchmarks/engine_candidates.py::kl_rows": "235948ab7655",
                     "benchmarks/engine_candidates.py::llama_update": "db13a173cdda",
                     "benchmarks/engine_candidates.py::timings": "8d546c2b79c5"},
    },
    "notebooks/data/generation_throughput.json": {
        "reason": "main names the machine by _common.machine(): the same text on a CPU; int8_mismatch computes its KL "
                  "by decode.kl_to_learner, the same arithmetic; " + _KL_TO_LEARNER_REASON + "; " + _ONE_FOLDER_REASON
                  + "; " + _LEGEND_REASON + "; " + _ONE_MASK_REASON + "; " + _TAKE_TURNS_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_TIMING, **_LEGEND, **_ONE_MASK, **_KL_TO_LEARNER,
                     **_GENERATION_THROUGHPUT_SCRIPT},
    },
    "notebooks/data/smollm2_gpu_engines.json": {
        "reason": "the run on the GPU wrote its rows as one dict by measure; rows_of, added after, turns that dict into "
                  "the list of rows the record format asks for, and the record was reshaped by rows_of itself: the "
                  "same values, one row per engine and measure; main warms both engines up in one loop and averages "
                  "the later steps with statistics.mean, the same calls and numbers; " + _FAST_ON_ANY_DEVICE_REASON.replace(
                      "on a CPU, where this record ran or where it named its engines", "this record names its engines")
                  + "; " + _ONE_FOLDER_REASON + "; " + _LEGEND_REASON + "; " + _ONE_MASK_REASON + "; "
                  + _TAKE_TURNS_REASON + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _TIMING_REASON
                  + "; it imports generation_throughput.py, whose changes are generation_throughput.json's, reviewed "
                  "there with the same reasons, and smollm2_gpu_long.py and smollm2_rl.py, where only the engine "
                  "option's help, the GPU record's header (code_state, threads) and the machine's text changed; "
                  + _LM_STUDY_RUNNER_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_TIMING, **_LEGEND, **_ONE_MASK,
                     **_GENERATION_THROUGHPUT_SCRIPT,
                     "benchmarks/smollm2_gpu_long.py::parse": "a5024eb8b6f4",
                     "benchmarks/smollm2_gpu_long.py::header": "54f0d2f22732",
                     "benchmarks/smollm2_rl.py::save": "693ee32b77b6",
                     "benchmarks/smollm2_gpu_engines.py::rows_of": "1642eedfb8f9",
                     "benchmarks/smollm2_gpu_engines.py::generation": "a8e05f623acb",
                     "benchmarks/smollm2_gpu_engines.py::main": "9fe010dd40a5", **_FAST_ON_ANY_DEVICE,
                     **_LM_STUDY_RUNNER,
                     # sampler_kl computes its KL by decode.kl_to_learner, the same arithmetic
                     "benchmarks/smollm2_gpu_engines.py::sampler_kl": "23231149a1eb", **_KL_TO_LEARNER,
                     "benchmarks/smollm2_gpu_engines.py::OUTPUT": "71de8879d638"},
    },
    "notebooks/data/ppo_from_copying_start.json": {
        "reason": "main reuses a seed's run folder only if it was made by the current code from the same checkpoint "
                  "(_common.reuse_or_clear) where it reused any folder with an eval.json; this record's two runs "
                  "were made afresh at its commit, and the command each runs is the same; " + _CODE_STATE_REASON
                  + "; the ppo command it starts (followed since the check counts `python -m course_lib ppo`) "
                  "samples its rollouts by actor.collect_rollout, which now writes through the GRU's one loop: "
                  + _ONE_SAMPLER_REASON,
        "reviewed": {**_CODE_STATE, "benchmarks/ppo_from_copying_start.py::main": "ea5c39a6ad2f",
                     "course_lib/gru/actor.py::collect_rollout": "2ec26391019b"},
    },
    "notebooks/data/llm_rl_benchmark.json": {"reason": _CODE_STATE_REASON, "reviewed": {**_CODE_STATE}},
    "notebooks/data/teacher_grpo_benchmark.json": {"reason": _CODE_STATE_REASON, "reviewed": {**_CODE_STATE}},
    **{f"notebooks/data/{name}.json": {"reason": f"{_REUSE_REASON}; {_GRU_STUDY_REUSE_REASON}; {_CODE_STATE_REASON}; "
                                                 f"{_COMMAND_ARGS_REASON}",
                                       "reviewed": {**_REUSE, **_GRU_STUDY_REUSE, **_CODE_STATE, **_COMMAND_ARGS}}
       for name in ("teacher_ablation", "gru_methods", "explore_ablation", "lambda_ablation")},
    "notebooks/data/reward_ablation.json": {
        "reason": f"{_REUSE_REASON}; run_one gives it the run's PPOConfig settings and the start's SHA-256, and builds "
                  f"the same PPOConfig from them; {_CODE_STATE_REASON}",
        "reviewed": {**_REUSE, **_CODE_STATE, "benchmarks/reward_ablation.py::run_one": "8673ebb937f0"}},
    **{f"notebooks/data/{name}.json": {"reason": _LM_REUSE_RULES_REASON,
                                       "reviewed": {**_LM_REUSE_RULES, f"benchmarks/studies/lm/{name}.toml::<file>": fp,
                                                    "benchmarks/_common.py::command_args": "44b451a04744",
                                                    "benchmarks/_common.py::read_study_file": "0e4606a4654a"}}
       for name, fp in (("smollm2_ppo", "dca68d9f0eba"), ("smollm2_reinforce", "4db494a033cd"))},
    "notebooks/data/scoring_benchmark.json": {"reason": f"{_REUSE_REASON} (this script calls neither); {_CODE_STATE_REASON}",
                                              "reviewed": {**_REUSE, **_CODE_STATE}},
    "notebooks/data/smollm2_step_time.json": {
        "reason": f"{_REUSE_REASON} (this script calls neither); {_CODE_STATE_REASON}; {_LM_STUDY_RUNNER_REASON}",
        "reviewed": {**_REUSE, **_CODE_STATE, **_LM_STUDY_RUNNER}},
    "notebooks/data/variants_pretraining.json": {
        "reason": _HEADER_ARGS_REASON + " (the command, with the arguments it ran with); " + _LEGEND_REASON + "; "
                  + _ONE_MASK_REASON + "; " + _ONE_SAMPLER_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_LEGEND, **_ONE_MASK, **_ONE_SAMPLER,
                     "benchmarks/variants_pretraining.py::main": "bddd6aad89d7"},
    },
    "notebooks/data/smollm2_cpu_seeds.json": {
        "reason": f"{_MOVED_REASON}; {_LEFT_PADDED_REASON}; the bfloat16 engine (21c9ac9) is a new option: the "
                  "float32 fast engine this record sampled with (engine auto on a CPU) runs the same code, "
                  "Snapshot/_Linear with precision 'float32' being the old quantize=False; "
                  f"{_METHOD_TABLE_REASON} (config.rl: method grpo, kl_coef 0.05); {_RENAMED_REASON}; "
                  f"{_STEP_INFO_REASON}; {_ONE_SCORER_REASON} (what this record reads); {_CHUNKED_REASON}; "
                  f"{_ONE_LEARNER_REASON}; {_ENGINE_ON_ANY_DEVICE_REASON}; {_FAST_ON_ANY_DEVICE_REASON}; "
                  + _LEGEND_REASON + "; " + _ONE_MASK_REASON
                  + "; " + _COMMON_HEADER_REASON + "; " + _CODE_STATE_REASON + "; " + _COMMON_GRU_NAMES_REASON,
        "reviewed": {**_COMMON_HEADER, **_CODE_STATE, **_COMMON_GRU_NAMES,
                     **_LEGEND, **_ONE_MASK, **_MOVED, **_LEFT_PADDED, **_METHOD_TABLE, **_RENAMED, **_STEP_INFO,
                     **_ONE_SCORER, **_CHUNKED, **_ONE_LEARNER,
                     "course_lib/lm/decode.py::ENGINES": "26e1d58ed450",
                     "course_lib/lm/decode.py::PRECISIONS": "435d122a2e7f",
                     "course_lib/lm/decode.py::_Linear": "55157e094f39",
                     "course_lib/lm/evaluation.py::generate": "72d55126b132",
                     **_ENGINE_ON_ANY_DEVICE, **_FAST_ON_ANY_DEVICE,
                     # main names the machine by _common.machine(): the same text on a CPU
                     "benchmarks/smollm2_cpu_seeds.py::main": "ae4f09755efd", **_KL_TO_LEARNER},
    },
}


try:  # imported as benchmarks.still_valid, or from benchmarks/
    from .rule_reviews import add
except ImportError:
    from rule_reviews import add
add(STILL_VALID)  # the reviews of one change to code that many records depend on
