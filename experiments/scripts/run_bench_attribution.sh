#!/usr/bin/env bash
# The attribution benchmark as measured for the README, in two runs that share one LM cache:
#
#   experiments/scripts/run_bench_attribution.sh [OUT_DIR]
#
# 1. Tracing with and without the LLM content judge on every case of the pooled mini + LoCoMo
#    slices (>= 100 injected cases over the four systems; real failures labelled by lineage or by
#    the LoCoMo audit). --max-replay-calls 6 skips an injection whose replay needs more calls (a
#    Mem0 ingestion fault re-decides every later memory update: ~35 s a call, ~20 min per case).
#    Tracing with counterfactual replay runs on the pooled RAG and EverMemOS cases and on the mini
#    slice's cases of all four systems (its replays are LM calls: ~30 s each for Long-Context on LoCoMo).
# 2. The four LLM baselines on a smaller injected subset of the mini slice (--max-cases 4: one
#    case per system x error type where the graph allows it). With the embedded 1.5B model on a
#    CPU they take 18 s to 2 min per case; a served model (models.*.provider: litellm) makes the
#    whole pool affordable. --full-replay keeps every question in the case graphs, as measured.
# Re-running is cheap: every system run and LM call already made is read back from the cache.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-runs/bench_attribution}"
cli="${MEMTRACE_OPT:-memtrace-opt}"
systems=long_context,rag,evermemos,mem0
mkdir -p "$out"

"$cli" bench-attribution "$here/configs/bench_attribution_mini.yaml" "$here/configs/bench_attribution_locomo.yaml" \
  --systems "$systems" --methods tracing,tracing+llm --max-cases 300 --max-real 60 --max-replay-calls 6 \
  --out "$out/tracing.json" --export "$out/export_tracing" | tee "$out/tracing.txt"

"$cli" bench-attribution "$here/configs/bench_attribution_mini.yaml" "$here/configs/bench_attribution_locomo.yaml" \
  --systems rag,evermemos --methods tracing,tracing+cf --max-cases 150 --max-real 60 --max-replay-calls 6 \
  --out "$out/tracing_cf_pooled.json" --export "$out/export_tracing_cf_pooled" | tee "$out/tracing_cf_pooled.txt"

"$cli" bench-attribution "$here/configs/bench_attribution_mini.yaml" \
  --systems "$systems" --methods tracing,tracing+cf --max-cases 120 --max-real 30 --max-replay-calls 6 \
  --out "$out/tracing_cf.json" --export "$out/export_tracing_cf" | tee "$out/tracing_cf.txt"

for method in flat_log all_at_once step_by_step binary_search; do
  "$cli" bench-attribution "$here/configs/bench_attribution_mini.yaml" \
    --systems "$systems" --methods "$method" --max-cases 4 --max-real 0 --full-replay \
    --out "$out/$method.json" --export "$out/export_$method" | tee "$out/$method.txt"
done
