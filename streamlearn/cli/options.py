"""Options shared by the subcommands, and the learner options generated from ``PARAMS``.

Every learner's hyper-parameters (:class:`streamlearn.algos.Param`) become ``--name`` options
(snake_case as VW, with a kebab-case alias); one option serves every learner that declares
the same name. An option that does not apply to the chosen ``--algo`` is a usage error.
"""
from __future__ import annotations

import click

__all__ = ["input_options", "output_options", "learner_options", "learner_params", "collect_hyper",
           "algo_names"]


def _kebab(name):
    return name.replace("_", "-")


def _names(name, short=None):
    names = [f"--{name}"]
    if "_" in name:
        names.append(f"--{_kebab(name)}")
    if short:
        names.insert(0, short)
    return names


def algo_names() -> list:
    """The ``--algo`` choices: the registered learners."""
    from ..api import LEARNERS

    return list(LEARNERS)


def learner_params():
    """All distinct Params over COMMON_PARAMS and every registered learner, in order."""
    from ..api import COMMON_PARAMS, LEARNERS

    seen = {}
    for p in COMMON_PARAMS:
        seen[p.name] = p
    for cls in LEARNERS.values():
        for p in cls.PARAMS:
            if p.name in seen:
                q = seen[p.name]
                if q.type != p.type and not (isinstance(q.type, tuple) and isinstance(p.type, tuple)):
                    raise RuntimeError(f"learner option --{p.name} declared with two types")
                continue
            seen[p.name] = p
    return list(seen.values())


def _users(name):
    from ..api import COMMON_PARAMS, LEARNERS

    if any(p.name == name for p in COMMON_PARAMS):
        return None
    return [n for n, c in LEARNERS.items() if any(p.name == name for p in c.PARAMS)]


def learner_options(f):
    """Decorator adding one click option per learner hyper-parameter (default None = unset)."""
    params = learner_params()
    for p in reversed(params):
        users = _users(p.name)
        where = "" if users is None else f" [{', '.join(users)}]"
        default_txt = "" if p.default is None else f" (default: {p.default})"
        if p.type is bool:
            opt = click.option(*_names(p.name, p.short), p.name, is_flag=True, default=None,
                               help=p.help + where)
        elif isinstance(p.type, tuple):
            opt = click.option(*_names(p.name, p.short), p.name, type=click.Choice(p.type), default=None,
                               help=p.help + default_txt + where)
        else:
            opt = click.option(*_names(p.name, p.short), p.name, type=p.type, default=None,
                               help=p.help + default_txt + where)
        f = opt(f)
    return f


def collect_hyper(kwargs: dict) -> dict:
    """Pop the learner options out of the command's kwargs: {name: value} for those given."""
    out = {}
    for p in learner_params():
        v = kwargs.pop(p.name, None)
        if v is not None:
            out[p.name] = v
    return out


def input_options(f):
    opts = [
        click.argument("files", nargs=-1, type=click.Path(dir_okay=True, allow_dash=True)),
        click.option("-d", "--data", "data", multiple=True, type=click.Path(dir_okay=True, allow_dash=True),
                     help="Input file ('-' = stdin); may repeat; positional FILES work too."),
        click.option("--format", "fmt", type=click.Choice(["auto", "vw", "libsvm", "parquet"]), default="auto",
                     show_default=True, help="Input format (auto: sniffed from the first bytes)."),
        click.option("--label_column", "--label-column", "label_column", default=None,
                     help="Parquet wide schema: the column holding the label."),
        click.option("--strict", is_flag=True, help="Stop at the first malformed line (exit 1) instead of skipping it."),
        click.option("-P", "--progress", "progress", default="2.0", show_default=True,
                     help="Progress rows: a float multiplies the interval (2.0: 1, 2, 4, ...), an integer adds."),
        click.option("--quiet", is_flag=True, help="Nothing on stderr except errors."),
        click.option("--metrics", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                     help="Write the run's figures as JSON to this file ('-' = stdout)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def output_options(f):
    opts = [
        click.option("-p", "--predictions", "predictions", type=click.Path(dir_okay=False, allow_dash=True),
                     default=None, help="Write one prediction per example (with its tag) to this file ('-' = stdout)."),
        click.option("-r", "--raw_predictions", "--raw-predictions", "raw_predictions",
                     type=click.Path(dir_okay=False, allow_dash=True), default=None,
                     help="Write the raw score of each example (before the label-range clipping, --binary and "
                          "--link; VW's -r) to this file ('-' = stdout)."),
        click.option("--link", type=click.Choice(["identity", "logistic"]), default="identity", show_default=True,
                     help="Transform written predictions (logistic: probability of the positive class)."),
        click.option("--probabilities", is_flag=True,
                     help="Multiclass (--oaa K): -p writes every class's probability, '1:p1 ... K:pK', as VW "
                          "(one-against-all: normalised sigmoids, needs --loss_function logistic; "
                          "multiclass_logistic: the softmax), and the summary adds the average multiclass "
                          "log loss."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f
