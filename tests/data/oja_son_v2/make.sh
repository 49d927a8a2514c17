#!/bin/sh
# An Oja-SON model written before --diag_rule existed (main at 9716988: the precond frame's diagonal
# step was max-normalised AdaGrad from D = 0.1, now --diag_rule nag), and what that version did when
# training continued from it (-p *.continue.txt). Run from a checkout of that commit:
#   sh tests/data/oja_son_v2/make.sh OUT_DIR
set -e
D=${1:-tests/data/oja_son_v2}
python3 -m streamlearn train --algo oja-son --sketch_size 4 sample_data/rcv1_small_200.vw.gz -b 16 -f $D/squared.slm --quiet
python3 -m streamlearn train -i $D/squared.slm sample_data/rcv1_small_200.vw.gz -p $D/squared.continue.txt -f $D/cont.slm --quiet
rm -f $D/cont.slm
