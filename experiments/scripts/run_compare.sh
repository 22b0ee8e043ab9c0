#!/usr/bin/env bash
# Run every optimization method on one config, then compare them on the held-out questions.
#
#   experiments/scripts/run_compare.sh CONFIG [OUT_BASE] [METHOD ...]
#
# OUT_BASE defaults to runs/compare/<config name>; METHOD defaults to all five. `none` runs first:
# it tunes the system settings when the config enables tuning, and every other method reuses them
# (--tuning-from), so methods differ only in their prompts. Every run is resumable: rerunning the
# script continues killed runs and skips finished ones. The runs share one LM disk cache
# (OUT_BASE/cache), so the seed prompts' answers are computed once for all methods.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 CONFIG [OUT_BASE] [METHOD ...]" >&2
  exit 2
fi
config="$1"
name="$(basename "${config%.*}")"
out_base="${2:-runs/compare/${name}}"
shift $(( $# >= 2 ? 2 : 1 ))
methods=("$@")
if [[ ${#methods[@]} -eq 0 ]]; then
  methods=(none attributed unattributed answer_feedback miprov2)
fi
cli="${MEMTRACE_OPT:-memtrace-opt}"

dirs=()
for method in "${methods[@]}"; do
  out="${out_base}/${method}"
  args=(optimize "$config" --method "$method" --out "$out" --resume --cache-dir "${out_base}/cache")
  if [[ "$method" != none && -f "${out_base}/none/tuning.json" ]]; then
    args+=(--tuning-from "${out_base}/none")
  fi
  echo "== ${method} -> ${out}" >&2
  "$cli" "${args[@]}"
  dirs+=("$out")
done

"$cli" compare "${dirs[@]}"
"$cli" compare "${dirs[@]}" --json > "${out_base}/compare.json"
echo "comparison saved to ${out_base}/compare.json" >&2
