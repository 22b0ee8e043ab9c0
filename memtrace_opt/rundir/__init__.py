"""The run directory: what every command leaves on disk, and the one way to write and read it.

A run directory outlives the code that wrote it (experiment runs are re-reported months later) and
each file is read by commands other than its writer, so its layout, its records and its JSON
reader/writer live here, below every command that uses them::

    RUN_DIR/config.yaml                    the fully resolved run config (a copy, for reproduction)
    RUN_DIR/config_changes.json            resumes that accepted a changed config (--force)
    RUN_DIR/graphs/<conversation>.jsonl.gz one memory evolution graph per conversation
    RUN_DIR/results.json                   one record per answered question (memtrace-results/1)
    RUN_DIR/summary.json                   accuracy with CIs per category, F1, BLEU-1, usage, failed ops
    RUN_DIR/usage.json                     LM usage totals (per role when a ledger was kept, per op)
    RUN_DIR/blame.json                     attribute's blame (memtrace-blame/2)
    RUN_DIR/lm_cache.sqlite                the LM disk cache, when the config names no cache_dir
    RUN_DIR/.lock                          held by the one process writing the run (lock.py)

An ``optimize`` run adds the loop's files::

    checkpoint.json                  loop state (memtrace-loop/1; memtrace_opt.loop.checkpoint)
    tuning.json, tuning.sqlite       tuned settings and the Optuna study (when tuning ran)
    rounds/round_<k>/prompts/*.txt   the candidate after round k
    rounds/round_<k>/blame.json      blame signals of the round's failures, grouped by component
    rounds/round_<k>/scores.json     per-question training and validation scores
    rounds/round_<k>/optimizer.json  what GEPA/MIPROv2 did (proposals, metric calls)
    rounds/round_<k>/demos.json      the worked examples mined that round (delta proposers)
    rounds/round_<k>/gepa/           GEPA's log (no pickled state: a killed round reruns from its start)
    prompts/<component>.txt, .diff   the final (best) prompts and their diff against the seed
    final.json                       held-out result: per-question scores, seed vs best, spend

Modules: :mod:`.layout` (names and paths), :mod:`.jsonio` (the atomic JSON writer and the reader
whose errors name the file), :mod:`.records` (the files' typed shapes, :class:`BlameReport`),
:mod:`.schemas` (versioned readers that convert older files), :mod:`.files` (each file's
reader and writer), :mod:`.lock` (one process per run directory).
"""

from __future__ import annotations

from memtrace_opt.rundir.files import (
    RESULTS_FORMAT, blame_payload, check_same_config, done_conversations, read_blame_report, read_config, read_conversation_stats,
    read_graph, read_results, read_summary, read_usage, write_blame, write_config, write_graph, write_results,
    write_summary, write_usage,
)
from memtrace_opt.rundir.jsonio import JSONObject, JSONValue, read_json, read_object, write_json, write_text
from memtrace_opt.rundir.layout import (
    BLAME_FILE, CHECKPOINT_FILE, CONFIG_CHANGES_FILE, CONFIG_FILE, FINAL_FILE, GRAPH_SUFFIX, GRAPHS_DIR, LOCK_FILE,
    PROMPTS_DIR, RESULTS_FILE, ROUNDS_DIR, SUMMARY_FILE, USAGE_FILE, clear_results, graph_path, list_graphs,
    round_blame_files, round_dir,
)
from memtrace_opt.rundir.lock import RunDirBusyError, run_lock
from memtrace_opt.rundir.records import BlameFile, BlameReport, CheckpointFile, EvalSummary, FinalReport, RoundScores
from memtrace_opt.rundir.schemas import (
    read_blame, read_checkpoint, read_final, read_round_optimizer, read_round_scores,
)

__all__ = [
    "BLAME_FILE", "CHECKPOINT_FILE", "CONFIG_CHANGES_FILE", "CONFIG_FILE", "FINAL_FILE", "GRAPHS_DIR", "GRAPH_SUFFIX",
    "LOCK_FILE", "PROMPTS_DIR", "RESULTS_FILE", "RESULTS_FORMAT", "ROUNDS_DIR", "SUMMARY_FILE", "USAGE_FILE",
    "BlameFile", "BlameReport", "CheckpointFile", "EvalSummary", "FinalReport", "JSONObject", "JSONValue", "RoundScores",
    "RunDirBusyError", "blame_payload", "check_same_config", "clear_results", "done_conversations", "graph_path", "list_graphs",
    "read_blame", "read_blame_report", "read_checkpoint", "read_config", "read_conversation_stats", "read_final",
    "read_graph", "read_json", "read_object", "read_results", "read_round_optimizer", "read_round_scores",
    "read_summary", "read_usage", "round_blame_files", "round_dir", "run_lock", "write_blame", "write_config",
    "write_graph", "write_json", "write_results", "write_summary", "write_text", "write_usage",
]
