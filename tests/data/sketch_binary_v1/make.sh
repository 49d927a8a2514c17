#!/bin/sh
# Binary bear and mission models written before the intercept was kept apart from the sketch and
# the heap (main at 49872af: the constant feature a heap feature like any other; no
# `intercept` in the model's meta), their predictions (-p *.predict.txt) and what that version
# did when training continued from them (-p *.continue.txt). The input has an offset, so the
# constant is in the saved heaps. Run from a checkout of that commit:
#   sh tests/data/sketch_binary_v1/make.sh OUT_DIR
set -e
D=${1:-tests/data/sketch_binary_v1}
python3 - "$D/input.vw" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(21)
with open(sys.argv[1], "w") as f:
    for i in range(80):
        x = rng.normal(size=6).round(3)
        y = 1 if x[0] - 0.7 * x[1] + 1.2 + 0.3 * rng.normal() > 0 else -1
        f.write(f"{y} |a " + " ".join(f"f{j}:{v}" for j, v in enumerate(x)) + "\n")
PY
for A in bear mission; do
  python3 -m streamlearn train --algo $A --sketch_rows 3 --sketch_width 16 --top_k 3 -l 0.3 $D/input.vw -f $D/$A.slm --quiet
  python3 -m streamlearn predict -i $D/$A.slm $D/input.vw -p $D/$A.predict.txt --quiet
  python3 -m streamlearn train -i $D/$A.slm $D/input.vw -p $D/$A.continue.txt -f $D/cont.slm --quiet
done
rm -f $D/cont.slm
