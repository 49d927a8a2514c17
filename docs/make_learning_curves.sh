#!/usr/bin/env bash
# Regenerates docs/learning_curves_a9a.png: progressive validation of the four learners on a9a
# (32,561 examples; ../shared/datasets, or A9A=path), logistic loss, default options otherwise.
#   bash docs/make_learning_curves.sh
set -euo pipefail
cd "$(dirname "$0")/.."
a9a="${A9A:-../shared/datasets/a9a/a9a_train.libsvm.gz}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for algo in adagrad oja-son bear mission; do
  python3 -m streamlearn train "$a9a" --algo "$algo" --loss_function logistic --quiet \
    --history_file "$tmp/$algo.jsonl"
done
python3 -m streamlearn plot "$tmp"/{adagrad,oja-son,bear,mission}.jsonl -o docs/learning_curves_a9a.png \
  --title "a9a (32,561 examples): progressive validation, logistic loss"
