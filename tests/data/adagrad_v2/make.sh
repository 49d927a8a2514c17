#!/bin/sh
# Models written by streamlearn before VW's default update became the default (main at f89a066,
# model FORMAT_VERSION 2, hyper `normalized` True/False, `learning_rate` None), and what that
# version did with them: continue training (-p *.continue.txt; the continued arrays in
# *.continued_w.npz) and predict (*.predict.txt). Run from a checkout of that commit:
#   sh tests/data/adagrad_v2/make.sh OUT_DIR
set -e
D=${1:-tests/data/adagrad_v2}
for m in plain normalized; do for loss in squared logistic; do
  flag=""; [ $m = normalized ] && flag="--normalized"
  python3 -m streamlearn train sample_data/a9a_train_3k.libsvm.gz --loss_function $loss $flag -b 12 -f $D/${m}_${loss}.slm --quiet
  python3 -m streamlearn train -i $D/${m}_${loss}.slm sample_data/a9a_test_1k.libsvm.gz -p $D/${m}_${loss}.continue.txt -f $D/cont.slm --quiet
  python3 -m streamlearn predict -i $D/${m}_${loss}.slm sample_data/a9a_test_1k.libsvm.gz -p $D/${m}_${loss}.predict.txt --quiet
  python3 -c "
import sys, numpy as np
from streamlearn.io.model_file import read_model
h, a = read_model('$D/cont.slm')
np.savez_compressed('$D/${m}_${loss}.continued_w.npz', **{k: np.asarray(a[k]) for k in ('w', 'G', 'N', 'scal')})"
  rm -f $D/cont.slm
done; done
