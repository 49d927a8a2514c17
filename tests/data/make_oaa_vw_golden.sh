#!/usr/bin/env bash
# Regenerate VW's --oaa golden outputs used by tests/test_multiclass.py.
# Needs VW 9.11.9 through /work/shared/tools/vw_run (or set VW_RUN to another runner).
# Input: oaa_golden_input.vw, the first 400 lines of letter_scale (26 classes, 16 features;
# ../shared/datasets/letter_scale) as VW text "y [w] ['tag]| i:v ...", every 7th line with
# importance weight 2 and every 5th with a tag (made from the dataset if missing).
# Outputs, for each run: <name>.pred (VW's -p) and <name>.summary (VW's summary lines), and
# VW's text models of one --oaa run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="${VW_RUN:-/work/shared/tools/vw_run}"
src="${STREAMLEARN_SHARED:-$here/../../../shared}/datasets/letter_scale/letter_scale.libsvm.gz"
in="$here/oaa_golden_input.vw"
if [ ! -f "$in" ]; then
  (zcat "$src" || true) | head -400 | awk '{y=$1; $1=""; w=(NR%7==0)?" 2":""; t=(NR%5==0)?" '"'"'r" NR:""; print y w t " |" $0}' > "$in"
fi
gen() {  # gen NAME VW_ARGS...
  local name="$1"; shift
  VW_RUN_NOTIME=1 "$run" "$in" -p "$here/$name.pred" "$@" 2>&1 \
    | grep -E '^(number of examples|weighted example sum|weighted label sum|average loss|average multiclass log loss|total feature number) =' \
    > "$here/$name.summary"
  echo "wrote $name.pred, $name.summary (vw args: $*)"
}
gen oaa_golden_b18 --oaa 26
gen oaa_golden_b8 --oaa 26 -b 8
gen oaa_golden_prob --oaa 26 --loss_function logistic --probabilities
# --readable_model / --invert_hash in VW's --oaa layout (index (i << 5) | class, names f[c])
VW_RUN_NOTIME=1 "$run" "$in" --oaa 26 -b 12 --quiet --readable_model "$here/oaa_golden_readable.txt" \
  --invert_hash "$here/oaa_golden_invert.txt"
echo "wrote oaa_golden_readable.txt, oaa_golden_invert.txt (vw args: --oaa 26 -b 12)"
