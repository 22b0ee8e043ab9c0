#!/bin/bash
# A frozen checkout for a long run: later commits to the main tree cannot change a run in progress.
# The main .venv's editable finder points at the main checkout, so the worktree gets its own tiny
# venv whose finder points at the worktree (dependencies are read from the main .venv).
# worktree_env.sh NAME COMMIT: a worktree /tmp/wt_NAME at COMMIT with venv /tmp/wtv_NAME whose editable finder maps to it
set -e
N=$1; C=$2; W=/tmp/wt_$N; V=/tmp/wtv_$N
ROOT="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$ROOT"
git worktree remove --force $W 2>/dev/null || rm -rf $W
git worktree prune
git worktree add -q $W $C
rm -rf $V
"$(readlink -f "$ROOT/.venv/bin/python")" -m venv $V
SP=$(echo "$ROOT"/.venv/lib/python3*/site-packages); D=$(echo $V/lib/python3*/site-packages)
echo "$SP" > $D/main_deps.pth
sed "s#$ROOT#$W#g" $SP/__editable___memtrace_opt_0_1_0_finder.py > $D/__editable___memtrace_opt_0_1_0_finder.py
cp $SP/__editable__.memtrace_opt-0.1.0.pth $D/
cp -r $SP/memtrace_opt-0.1.0.dist-info $D/
sed "s#^\#!$ROOT/.venv/bin/python#\#!$V/bin/python#" $ROOT/.venv/bin/memtrace-opt > $V/bin/memtrace-opt
chmod +x $V/bin/memtrace-opt
cd /tmp && $V/bin/python -c "import memtrace_opt.attribution.tracing as t; assert t.__file__.startswith('$W'), t.__file__; print('ok', t.__file__)"
