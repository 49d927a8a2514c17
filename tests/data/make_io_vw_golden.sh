#!/usr/bin/env bash
# Regenerate the VW golden feature indices used by tests/test_readers.py.
# Needs VW 9.11.9 through /work/shared/tools/vw_run (or set VW_RUN to another runner).
# For each example of io_vw_golden_input.vw, VW's `--audit -b 18` prints every feature as
# name:index:value:weight; we keep "index:value" per feature, one example per line,
# in VW's order (the test compares sorted multisets).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="${VW_RUN:-/work/shared/tools/vw_run}"
gen() {  # gen OUTFILE VW_ARGS...
  local out="$1"; shift
  VW_RUN_NOTIME=1 "$run" "$here/io_vw_golden_input.vw" --audit -b 18 "$@" 2>/dev/null \
    | python3 -c '
import sys
for line in sys.stdin:
    if not line.startswith("\t"):
        continue
    toks = []
    for f in line.strip("\t\n").split("\t"):
        name, index, value, _w = f.rsplit(":", 3)
        toks.append(index + ":" + value)
    print(" ".join(toks))
' > "$here/$out"
  echo "wrote $out ($(wc -l < "$here/$out") examples; vw args: $*)"
}
gen io_vw_golden_q_ab_cc.txt -q ab -q cc
gen io_vw_golden_q_ba_aa.txt -q ba -q aa
gen io_vw_golden_noconst.txt --noconstant
