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
# interactions of any order, VW's ':' wildcard and its duplicate rules, namespace selection
gen io_vw_golden_cubic.txt --cubic abc --cubic aba -q ba -q ab
gen io_vw_golden_wild_qq.txt -q ::
gen io_vw_golden_wild_mixed.txt -q a: --cubic ::c -q ab
gen io_vw_golden_inter4.txt --interactions abcb --interactions aaaa --interactions ':b'
gen io_vw_golden_leave_dup.txt -q ab -q ba -q :a --leave_duplicate_interactions
gen io_vw_golden_ignore.txt --ignore a --ignore ' ' -q bc -q ::
gen io_vw_golden_keep.txt --keep b --keep c --cubic bbc
# --ignore_linear: VW's audit still lists the linear features (print_features does not apply
# it), so this golden holds the indices VW's --readable_model gives a weight: every feature
# that was learned from (a's interactions, never a's own features)
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
VW_RUN_NOTIME=1 "$run" "$here/io_vw_golden_input.vw" -b 18 --ignore_linear a -q ab \
    --readable_model "$tmp/readable.txt" --quiet >/dev/null 2>&1
python3 -c '
import sys
idx = sorted(int(l.split(":")[0]) for l in open(sys.argv[1]) if ":" in l and l.split(":")[0].isdigit())
print(" ".join(map(str, idx)))
' "$tmp/readable.txt" > "$here/io_vw_golden_ignore_linear.txt"
echo "wrote io_vw_golden_ignore_linear.txt (vw args: --ignore_linear a -q ab --readable_model)"
