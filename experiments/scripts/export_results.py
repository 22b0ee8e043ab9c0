"""Copy a comparison's results into its experiment record without any LoCoMo text (CC BY-NC: never committed).

    python experiments/scripts/export_results.py runs/compare/<name> experiments/records/<record>/<name>

Writes, per method run: ``<method>_final.json`` (held-out scores per question id and category, seed vs
best, spend, stop reason, the audit of rejected candidates with their prompts redacted; no question, gold
or prediction text), ``<method>_rounds.json`` (each round's
failures, blame counts, validation score, the proposals' kinds and verdicts, rule texts), and
``<method>_prompt_<component>.txt`` (the best prompt with every worked example replaced by the id of
the question it came from — the examples quote the conversation). Copies ``compare.json`` as is.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from memtrace_opt.graph.prompt_parts import PromptParts, split_prompt


def redacted_prompt(text: str) -> str:
    """The prompt with each worked example (it quotes the conversation and the gold) replaced by a marker."""
    parts = split_prompt(text)
    examples = tuple(f"[worked example {i + 1}: LoCoMo text redacted]" for i in range(len(parts.examples)))
    return PromptParts(parts.instruction, parts.rules, examples).render()


def export_run(run: Path, out: Path) -> None:
    method = run.name
    final = json.loads((run / "final.json").read_text())
    cases = [{k: c[k] for k in ("qa_id", "conversation", "category", "seed_score", "best_score")} for c in final["cases"]]
    keep = {k: v for k, v in final.items() if k not in ("cases", "audit")}
    if final.get("audit"):  # answers and worked examples quote the conversation: scores and redacted prompts only
        keep["audit"] = [{k: v for k, v in e.items() if k not in ("candidate", "predictions")}
                         | {"candidate": {c: redacted_prompt(t) for c, t in e["candidate"].items()}}
                         for e in final["audit"]]
    (out / f"{method}_final.json").write_text(json.dumps({**keep, "cases": cases}, indent=1))
    checkpoint = json.loads((run / "checkpoint.json").read_text())
    rounds = []
    for r in checkpoint.get("rounds", []):
        opt = json.loads((run / "rounds" / f"round_{r['index']}" / "optimizer.json").read_text()) \
            if (run / "rounds" / f"round_{r['index']}" / "optimizer.json").exists() else {}
        proposals = [{k: p.get(k) for k in ("component", "mode", "accepted")} | {"reason": re.sub(
            r"\((?:repair|bootstrap):[^)]*\)", "(demo ids omitted)", str(p.get("reason", "")))[:300]}
            for p in opt.get("proposals", [])]
        rounds.append({k: r.get(k) for k in ("index", "train_conversations", "failures", "cases", "blamed",
                                             "unoptimizable", "optimized", "val_score", "improved", "spend", "note")}
                      | {"candidates": opt.get("candidates"), "metric_calls": opt.get("metric_calls"),
                         "proposals": proposals, "rules": opt.get("rules", []), "lines": opt.get("lines", []),
                         "pruning": opt.get("pruning", [])})
    (out / f"{method}_rounds.json").write_text(json.dumps({"baseline_val": checkpoint.get("baseline_val"),
                                                          "best_val": checkpoint.get("best_val"),
                                                          "stop_reason": checkpoint.get("stop_reason"),
                                                          "rounds": rounds}, indent=1))
    for path in sorted((run / "prompts").glob("*.txt")):
        (out / f"{method}_prompt_{path.stem}.txt").write_text(redacted_prompt(path.read_text()))


def main(argv: list[str]) -> None:
    base, out = Path(argv[0]), Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for run in sorted(p for p in base.iterdir() if (p / "final.json").exists()):
        export_run(run, out)
    if (base / "compare.json").exists():
        (out / "compare.json").write_text((base / "compare.json").read_text())


if __name__ == "__main__":
    main(sys.argv[1:])
