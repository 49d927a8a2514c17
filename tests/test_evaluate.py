import numpy as np

from streamlearn.algos.losses import get_loss
from streamlearn.batch import Batch
from streamlearn.evaluate import Evaluation, ProgressSchedule


def _batch(labels):
    n = len(labels)
    return Batch(np.arange(n + 1, dtype=np.int64), np.zeros(n, np.uint32), np.ones(n),
                 np.asarray(labels, float), np.ones(n))


def _error(loss_name, labels, preds, cut):
    loss = get_loss(loss_name)
    ev = Evaluation(loss_name, loss.classification)
    for a, b in ((0, cut), (cut, len(labels))):
        lb = np.asarray(labels[a:b], float)
        ev.add(_batch(lb), np.asarray(preds[a:b], float), np.zeros(b - a), None)
    return ev.summary(loss)["error_rate"]


def test_error_rate_for_squared_loss_uses_the_label_encoding():
    # {0,1} labels: threshold 0.5; {-1,+1}: threshold 0; independent of how batches are cut
    assert _error("squared", [1, 1, 0, 0], [0.6, 0.4, 0.4, 0.6], 2) == 0.5
    assert _error("squared", [1, 1, 0, 0], [0.6, 0.7, 0.4, 0.1], 2) == 0.0
    assert _error("squared", [1, 1, -1, -1], [0.4, 0.2, -0.3, -0.1], 2) == 0.0
    assert _error("squared", [1, 1, -1, -1], [0.4, -0.2, -0.3, 0.1], 2) == 0.5
    assert _error("logistic", [1, 0, 1, 0], [2.0, -1.0, -0.5, 0.5], 1) == 0.5


def test_progress_rows_at_doubling_counts_whatever_the_batches():
    rows = []
    ev = Evaluation("squared", False)
    sched = ProgressSchedule("2.0")
    for a in range(0, 100, 7):
        n = min(7, 100 - a)
        ev.add(_batch(np.ones(n)), np.zeros(n), np.full(n, 1.0), sched, lambda *r, **kw: rows.append(r))
    assert [r[2] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert all(r[0] == 1.0 for r in rows)
    assert ev.summary(get_loss("squared"))["average_loss"] == 1.0
