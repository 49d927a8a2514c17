#!/bin/sh
# FD-SON and RFD-SON models written before --no_invariant / --no_clip existed (main at 73a6abf: the
# paper's plain step u = w - A^-1 g, no label-range clip, flt of 3 floats, sigma_eta and alpha0 saved
# unset = 1 and 0), and what that version did when training continued from them (-p *.continue.txt).
# Run from a checkout of that commit:
#   sh tests/data/fd_son_v1/make.sh OUT_DIR
set -e
D=${1:-tests/data/fd_son_v1}
S=sample_data/a9a_test_1k.libsvm.gz
python3 -m streamlearn train --algo fd-son --sketch_size 4 --alpha 16 $S -b 12 -f $D/fd_squared.slm --quiet
python3 -m streamlearn train -i $D/fd_squared.slm $S -p $D/fd_squared.continue.txt -f $D/cont.slm --quiet
python3 -m streamlearn train --algo rfd-son --sketch_size 4 $S -b 12 -f $D/rfd_squared.slm --quiet
python3 -m streamlearn train -i $D/rfd_squared.slm $S -p $D/rfd_squared.continue.txt -f $D/cont.slm --quiet
rm -f $D/cont.slm
