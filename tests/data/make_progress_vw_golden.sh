#!/usr/bin/env bash
# Regenerate VW's progress tables on an importance-weighted file, for tests/test_progress.py
# (the table's "example weight" column and where the rows fall: VW's cumulative weight).
# Needs VW 9.11.9 through /work/shared/tools/vw_run (or set VW_RUN to another runner).
# progress_weighted.vw: 400 lines of sample_data/a9a_train_3k.libsvm.gz as VW text, with
# importance weights in {0.25, 0.5, 1, 2, 3.5} and every 37th line unlabeled (seeded, fixed).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
run="${VW_RUN:-/work/shared/tools/vw_run}"
python3 - "$here/../../sample_data/a9a_train_3k.libsvm.gz" "$here/progress_weighted.vw" <<'PY'
import gzip, random, sys
rng = random.Random(20)
out = []
with gzip.open(sys.argv[1], "rt") as f:
    for i, line in enumerate(f):
        if i == 400:
            break
        label, *feats = line.split()
        w = rng.choice(["0.25", "0.5", "1", "2", "3.5"])
        head = f"|f" if i % 37 == 36 else f"{'1' if float(label) > 0 else '-1'} {w} |f"
        out.append(head + " " + " ".join(feats))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
PY
gen() {  # gen OUTFILE VW_ARGS...
  local out="$1"; shift
  VW_RUN_NOTIME=1 "$run" "$here/progress_weighted.vw" "$@" 2>&1 >/dev/null \
    | grep -E '^([0-9]+\.[0-9]+|n\.a\.|unknown) ' > "$here/$out"
  echo "wrote $out ($(wc -l < "$here/$out") rows; vw args: $*)"
}
gen progress_weighted_P2.table --loss_function logistic
gen progress_weighted_P1.5.table --loss_function logistic -P 1.5
gen progress_weighted_P25.table --loss_function logistic -P 25
