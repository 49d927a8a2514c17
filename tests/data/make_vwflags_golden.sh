#!/usr/bin/env bash
# Regenerate VW's --audit, --readable_model and --invert_hash outputs used by
# tests/test_vwflags.py. Needs VW 9.11.9 through /work/shared/tools/vw_run (or set VW_RUN).
# The input is io_vw_golden_input.vw without two lines streamlearn reads differently from VW
# (a "base" label token, which VW adds to the prediction, and a tab after the label, which
# makes VW's label unreadable): vwflags_input.vw. Both tools run their default learner (the
# same update: normalized, adaptive, invariant).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="${VW_RUN:-/work/shared/tools/vw_run}"
grep -v "'base" "$here/io_vw_golden_input.vw" | grep -v "$(printf '\t')" > "$here/vwflags_input.vw"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
gen() {  # gen NAME VW_ARGS...: NAME_audit.txt, NAME_readable.txt, NAME_invert.txt
  local name="$1"; shift
  VW_RUN_NOTIME=1 "$run" "$here/vwflags_input.vw" -b 18 --quiet --audit "$@" \
      --readable_model "$tmp/r.txt" --invert_hash "$tmp/i.txt" > "$here/${name}_audit.txt" 2>/dev/null
  cp "$tmp/r.txt" "$here/${name}_readable.txt"
  cp "$tmp/i.txt" "$here/${name}_invert.txt"
  echo "wrote ${name}_{audit,readable,invert}.txt (vw args: $*)"
}
gen vwflags_q_cubic -q ab --cubic ::c
gen vwflags_wild_ignore -q :: --ignore c
