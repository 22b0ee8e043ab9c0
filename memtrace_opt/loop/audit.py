"""A held-out audit of selection: what the candidates the loop validated but did not keep would have done.

The loop keeps a candidate only when it beats the best so far on the validation set, and a small
validation set decides that by very few questions (the quickstart's by six). "Changed: nothing" then
says neither whether the search produced anything worth having nor whether validation judged it
right. This audit answers both after the fact: each rejected candidate (best validation score first)
is scored on the held-out questions beside the seed, with the paired gain, its 95% CI and p.

It is a check on selection, never an input to it: it runs after the final prompts are fixed and
written, nothing reads it back, and choosing a prompt by these numbers would overfit the held-out
set the way the loop is built not to (see ``experiments/README``: pre-registration).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from memtrace_opt.eval.metrics import paired_bootstrap
from memtrace_opt.optimizers.adapter import MemoryPromptAdapter
from memtrace_opt.optimizers.cases import QACase
from memtrace_opt.graph.prompt_parts import split_prompt

__all__ = ["audit_lines", "audit_rejected", "audit_summary", "describe_delta", "rejected_candidates"]


def rejected_candidates(rounds: Iterable[Any], *, seed: Mapping[str, str], best: Mapping[str, str],
                        limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` distinct candidates the rounds validated, other than the seed and the kept
    prompts: ``{"round", "val_score", "candidate"}``, best validation score first (ties: found first)."""
    seen = {_key(seed), _key(best)}
    found: list[dict[str, Any]] = []
    for record in rounds:
        for entry in (record.optimizer or {}).get("validated") or []:
            candidate = dict(entry["candidate"])
            if _key(candidate) in seen:
                continue
            seen.add(_key(candidate))
            found.append({"round": record.index, "val_score": float(entry["val_score"]), "candidate": candidate})
    found.sort(key=lambda e: -e["val_score"])  # stable: ties keep the order they were found in
    return found[:limit]


def describe_delta(seed: Mapping[str, str], candidate: Mapping[str, str]) -> str:
    """What a candidate changes against the seed, per component: rules and examples added or removed,
    instruction lines dropped or added (``question_answering: +3 examples, -1 line``)."""
    parts = []
    for component in sorted(candidate):
        if candidate[component] == seed.get(component):
            continue
        old, new = split_prompt(seed.get(component, "")), split_prompt(candidate[component])
        old_lines = [ln.strip() for ln in old.instruction.splitlines() if ln.strip()]
        new_lines = [ln.strip() for ln in new.instruction.splitlines() if ln.strip()]
        counts = [(len(new.rules) - len(old.rules), "rule"), (len(new.examples) - len(old.examples), "example"),
                  (-len([ln for ln in old_lines if ln not in new_lines]), "line"),
                  (len([ln for ln in new_lines if ln not in old_lines]), "line")]
        edits = [f"{n:+d} {what}{'s' if abs(n) > 1 else ''}" for n, what in counts if n]
        parts.append(f"{component}: {', '.join(edits) or 'edited'}")
    return "; ".join(parts) or "no change"


def audit_rejected(adapter: MemoryPromptAdapter, cases: Sequence[QACase], *, seed: Mapping[str, str],
                   seed_scores: Mapping[str, float], entries: Sequence[Mapping[str, Any]], n_boot: int = 2000,
                   boot_seed: int = 0) -> list[dict[str, Any]]:
    """Score each entry's candidate on ``cases`` and pair it with the seed's ``{qa id: score}`` on them
    (the final comparison's); one record per entry, for final.json's ``audit``."""
    out = []
    for entry in entries:
        traces = adapter.run(cases, dict(entry["candidate"]))
        scores = {t.case.qa_id: float(t.score) for t in traces}
        pc = paired_bootstrap(seed_scores, scores, n=n_boot, seed=boot_seed)
        n = len(scores)
        out.append({
            "round": entry["round"], "val_score": entry["val_score"], "change": describe_delta(seed, entry["candidate"]),
            "accuracy": sum(scores.values()) / n if n else 0.0, "gain": pc.mean_diff,
            "gain_ci": [pc.ci_low, pc.ci_high], "p_value": pc.p_value,
            "fixed": sum(1 for q, s in scores.items() if s > seed_scores[q]),
            "broken": sum(1 for q, s in scores.items() if s < seed_scores[q]),
            "candidate": dict(entry["candidate"]), "scores": scores,
            "predictions": {t.case.qa_id: t.prediction for t in traces},
        })
    return out


def audit_summary(audit: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The audit without prompt texts and per-question scores and answers (for the checkpoint and ``--json``)."""
    return [{k: v for k, v in entry.items() if k not in ("candidate", "scores", "predictions")} for entry in audit]


def audit_lines(audit: Sequence[Mapping[str, Any]], seed_accuracy: float) -> list[str]:
    """One line per audited candidate, as ``optimize`` prints them under a heading that says what they are.

    >>> audit_lines([{"round": 1, "val_score": 0.5, "change": "qa: +1 rule", "accuracy": 0.25, "gain": -0.25,
    ...               "gain_ci": [-0.5, 0.0], "p_value": 0.5, "fixed": 0, "broken": 1}], 0.5)[1]
    '  round 1 · qa: +1 rule · validation 50.0% · held-out 25.0% vs seed 50.0%: -25.0 [-50.0, +0.0], p = 0.500 · 0 fixed, 1 broken'
    """
    lines = ["held-out audit of candidates validation rejected (a check on selection, never a choice):"]
    for e in audit:
        low, high = e["gain_ci"]
        lines.append(f"  round {e['round']} · {e['change']} · validation {100 * e['val_score']:.1f}% · held-out "
                     f"{100 * e['accuracy']:.1f}% vs seed {100 * seed_accuracy:.1f}%: {100 * e['gain']:+.1f} "
                     f"[{100 * low:+.1f}, {100 * high:+.1f}], p = {e['p_value']:.3f} · {e['fixed']} fixed, "
                     f"{e['broken']} broken")
    return lines


def _key(candidate: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(candidate.items()))
