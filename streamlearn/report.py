"""Formats VW's progress table and end-of-run summary (pure string formatting)."""
from __future__ import annotations

import math

__all__ = ["table_header", "table_row", "summary_lines", "settings_lines"]


def table_header() -> list[str]:
    return [
        "average  since         example        example        current        current  current",
        "loss     last          counter         weight          label        predict features",
    ]


def _fmt_num(x, multiclass=False):
    if isinstance(x, str):  # already formatted (e.g. VW's "3(44%)" of --probabilities)
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "unknown"
    if multiclass:
        return str(int(x))
    return f"{x:.4f}"


def table_row(avg, since, count, weight, label, pred, features, multiclass=False) -> str:
    a = "n.a." if avg is None or math.isnan(avg) else f"{avg:.6f}"
    s = "n.a." if since is None or math.isnan(since) else f"{since:.6f}"
    return (f"{a:<8} {s:<8} {count:>12d} {weight:>14.1f} {_fmt_num(label, multiclass):>14} "
            f"{_fmt_num(pred, multiclass):>14} {features:>8d}")


def summary_lines(s: dict) -> list[str]:
    """VW's end summary, plus streamlearn's extra lines (error rate, speed, skipped lines)."""
    out = ["", "finished run"]
    out.append(f"number of examples = {s['examples']}")
    out.append(f"weighted example sum = {s['weighted_examples']:.6f}")
    out.append(f"weighted label sum = {s['weighted_label_sum']:.6f}")
    out.append("average loss = " + ("n.a." if s.get("average_loss") is None else f"{s['average_loss']:.6f}"))
    if s.get("multiclass_log_loss") is not None:
        out.append(f"average multiclass log loss = {s['multiclass_log_loss']:.6f}")
    if s.get("best_constant") is not None:
        out.append(f"best constant = {s['best_constant']:.6f}")
        out.append(f"best constant's loss = {s['best_constant_loss']:.6f}")
    if s.get("error_rate") is not None:
        out.append(f"error rate = {s['error_rate']:.6f}")
    out.append(f"total feature number = {s['total_features']}")
    if s.get("skipped_lines"):
        out.append(f"skipped lines = {s['skipped_lines']}")
    for k, v in (s.get("learner") or {}).items():
        out.append(f"{k.replace('_', ' ')} = {v}")
    out.append(f"seconds = {s['seconds']:.3f} ({s['examples_per_second']:.0f} examples/s)")
    return out


def settings_lines(cfg, learner, reader: dict, learn: bool) -> list[str]:
    """The settings VW prints before its table: the learner, its hyper-parameters, the
    reader's transforms and the run's files (``cfg``: an :class:`streamlearn.api.RunConfig`)."""
    lines = [f"algorithm = {learner.name}", f"Num weight bits = {learner.bits}"]
    # what a default (None) or "auto" resolves to, where the learner says (the sketch learners' steps)
    resolved = {k.lstrip("-"): v for k, v in (learner.step_settings() if hasattr(learner, "step_settings") else {}).items()}
    for k, v in learner.hyper.items():
        if k == "loss_function":
            v = learner.loss_name
        elif k in resolved and v is None:
            v = resolved[k]
        elif k in resolved and v == "auto":
            v = f"{resolved[k]} (auto)"
        if k != "bit_precision" and v is not None:
            lines.append(f"{k} = {v}")
    if reader.get("quadratic"):
        lines.append("quadratic = " + " ".join(reader["quadratic"]))
    for k in ("cubic", "interactions", "ignore", "keep", "ignore_linear"):
        if reader.get(k):
            lines.append(f"{k} = " + " ".join(reader[k]))
    if reader.get("unit_norm"):
        lines.append("unit_norm = True")
    if reader.get("binary") or getattr(cfg, "binary", False):
        lines.append("binary = True")
    if cfg.initial_model:
        lines.append(f"initial model = {cfg.initial_model}")
    if cfg.final_model:
        lines.append(f"final model = {cfg.final_model}")
    if cfg.predictions:
        lines.append(f"predictions = {cfg.predictions}")
    if getattr(cfg, "raw_predictions", None):
        lines.append(f"raw predictions = {cfg.raw_predictions}")
    if not learn or cfg.test_only:
        lines.append("only testing")
    lines.append("data = " + " ".join("<stdin>" if d == "-" else d for d in cfg.data))
    return lines
