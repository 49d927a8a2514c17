#!/bin/sh
# bear and mission --oaa 26 models written before --example_norm existed and before the class
# sketches were stored class-interleaved in memory (main at 5d79dbc: no `example_norm` in their
# hyper-parameters, examples learned as given, bear --minibatch 10, mission -l 0.01), and what
# that version did when training continued from them (-p *.continue.txt). Run from a checkout of
# that commit:
#   sh tests/data/sketch_oaa_v1/make.sh OUT_DIR
set -e
D=${1:-tests/data/sketch_oaa_v1}
IN=tests/data/oaa_golden_input.vw
for A in bear mission; do
  python3 -m streamlearn train --algo $A --oaa 26 --sketch_rows 3 --sketch_width 64 --top_k 20 $IN -f $D/$A.slm --quiet
  python3 -m streamlearn train -i $D/$A.slm $IN -p $D/$A.continue.txt -f $D/cont.slm --quiet
done
rm -f $D/cont.slm
