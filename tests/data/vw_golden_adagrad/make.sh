#!/usr/bin/env bash
# Regenerate VW's outputs for tests/test_vw_golden_adagrad.py: for each line "name | flags" of
# cases.txt, VW 9.11.9 (through /work/shared/tools/vw_run, or $VW_RUN) runs one pass over
# sample_data/news20_binary_test_100.vw with those flags and -p NAME.p -r NAME.r; the average
# loss of its summary goes to NAME.loss.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="${VW_RUN:-/work/shared/tools/vw_run}"
data="$here/../../../sample_data/news20_binary_test_100.vw"
grep -v '^#' "$here/cases.txt" | while IFS='|' read -r name flags; do
  name="$(echo $name)"
  # shellcheck disable=SC2086
  VW_RUN_NOTIME=1 "$run" "$data" $flags -p "$here/$name.p" -r "$here/$name.r" 2> "$here/$name.log"
  grep '^average loss' "$here/$name.log" | sed 's/.*= *//' > "$here/$name.loss"
  rm -f "$here/$name.log"
  echo "$name: vw $flags -> average loss $(cat "$here/$name.loss")"
done
