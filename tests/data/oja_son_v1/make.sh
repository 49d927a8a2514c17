#!/bin/sh
# An Oja-SON model written before Oja's step cap (--oja_clip) existed (main at 8bfdec9: no
# `oja_clip` in its hyper-parameters), and what that version did when training continued from it
# (-p *.continue.txt) on sparse text under squared loss, where the cap binds. Run from a checkout
# of that commit:
#   sh tests/data/oja_son_v1/make.sh OUT_DIR
set -e
D=${1:-tests/data/oja_son_v1}
python3 -m streamlearn train --algo oja-son --sketch_size 4 sample_data/rcv1_small_200.vw.gz -b 16 -f $D/squared.slm --quiet
python3 -m streamlearn train -i $D/squared.slm sample_data/rcv1_small_200.vw.gz -p $D/squared.continue.txt -f $D/cont.slm --quiet
rm -f $D/cont.slm
