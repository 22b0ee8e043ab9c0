"""Agreement of an attributor's blame.json with hand labels (experiments/results/human_labels_*/labels.json).

    python experiments/scripts/human_label_agreement.py LABELS.json RUN_DIR/blame.json [--json]

Per labelled case: the blamed error type and op must match the label's (op: the same op id; a label
naming a gold variable matches any blame of that AnnotationError). Reported on clear cases (the goal
of issue #12: >= 80%) and on all cases, with the confusion of types; also the same op with the type
aside (``same_op``) and the same prompt component (``same_prompt``: what routing an edit needs; an op
with no prompt, a retrieval or a gold answer, counts as no component, and an op kind's component is
read from the blame file's own signals). Prints one JSON object with
--json, else a short table.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def _signals(blame: dict) -> dict[str, dict]:
    signals = blame["signals"]
    items = signals.values() if isinstance(signals, dict) else signals
    return {s["case_id"]: s for s in items}


def _same_op(label: dict, signal: dict) -> bool:
    if label["error_type"] == "AnnotationError":
        return signal.get("error_type") == "AnnotationError"
    return (signal.get("op_id") or "") == label["op_id"]


def _op_kind(op_id: str | None) -> str:
    """``ingest:s4/mem0.update_decision#0`` -> ``mem0.update_decision``: the op whatever its session or question."""
    return (op_id or "").rsplit("/", 1)[-1].split("#", 1)[0]


def _components(signals: dict[str, dict]) -> dict[str, str | None]:
    """Each op kind's prompt component, as the blame file's signals name it."""
    return {_op_kind(s.get("op_id")): s.get("prompt_component") for s in signals.values() if s.get("op_id")}


def agreement(labels: dict, blame: dict) -> dict:
    by_case = _signals(blame)
    component = _components(by_case)
    rows, confusion = [], Counter()
    for case in labels["cases"]:
        signal = by_case.get(case["qa_id"])
        if signal is None:
            rows.append({**case, "blamed_type": None, "blamed_op": None, "type_ok": False, "op_ok": False,
                         "same_op": False, "same_prompt": False})
            continue
        type_ok = signal.get("error_type") == case["error_type"]
        rows.append({"qa_id": case["qa_id"], "confidence": case["confidence"], "label_type": case["error_type"],
                     "blamed_type": signal.get("error_type"), "label_op": case["op_id"], "blamed_op": signal.get("op_id"),
                     "type_ok": type_ok, "op_ok": type_ok and _same_op(case, signal),
                     "same_op": _same_op(case, signal) if type_ok else (signal.get("op_id") or "") == case["op_id"],
                     "same_prompt": component.get(_op_kind(case["op_id"])) == signal.get("prompt_component")})
        confusion[f"{case['error_type']} -> {signal.get('error_type')}"] += 1

    def share(subset: list[dict], key: str) -> float | None:
        return round(sum(r[key] for r in subset) / len(subset), 3) if subset else None

    clear = [r for r in rows if r["confidence"] == "clear"]
    return {"cases": len(rows), "clear": len(clear),
            "clear_type_agreement": share(clear, "type_ok"), "clear_op_agreement": share(clear, "op_ok"),
            "all_type_agreement": share(rows, "type_ok"), "all_op_agreement": share(rows, "op_ok"),
            "clear_same_op": share(clear, "same_op"), "all_same_op": share(rows, "same_op"),
            "clear_same_prompt": share(clear, "same_prompt"), "all_same_prompt": share(rows, "same_prompt"),
            "confusion": dict(sorted(confusion.items())), "rows": rows}


def main(argv: list[str]) -> None:
    labels = json.loads(Path(argv[0]).read_text())
    blame = json.loads(Path(argv[1]).read_text())
    result = agreement(labels, blame)
    if "--json" in argv:
        print(json.dumps(result, indent=1))
        return
    print(f"clear cases {result['clear']}/{result['cases']}: type {result['clear_type_agreement']}, "
          f"op {result['clear_op_agreement']}; all: type {result['all_type_agreement']}, op {result['all_op_agreement']}")
    print(f"same op (type aside): clear {result['clear_same_op']}, all {result['all_same_op']}; "
          f"same prompt: clear {result['clear_same_prompt']}, all {result['all_same_prompt']}")
    for pair, n in result["confusion"].items():
        print(f"  {pair}: {n}")
    for r in result["rows"]:
        if not r["op_ok"]:
            print(f"  disagree {r['qa_id']} ({r['confidence']}): label {r.get('label_type')} @ {r.get('label_op')} "
                  f"| blame {r['blamed_type']} @ {r['blamed_op']}")


if __name__ == "__main__":
    main(sys.argv[1:])
