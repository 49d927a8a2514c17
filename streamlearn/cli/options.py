"""Options shared by the subcommands, and the learner options generated from ``PARAMS``.

Every learner's hyper-parameters (:class:`streamlearn.algos.Param`) become ``--name`` options
(snake_case as VW, with a kebab-case alias); one option serves every learner that declares
the same name. An option that does not apply to the chosen ``--algo`` is a usage error.
"""
from __future__ import annotations

import click

__all__ = ["grouped", "INPUT", "FEATURES", "LEARNER", "OUTPUT", "REPORT", "INSPECT", "VW_COMPAT", "input_options", "limit_options", "output_options", "learner_options", "learner_params", "collect_hyper",
           "algo_names", "namespace_options", "inspect_options", "vw_compat_options", "NAMESPACE_FIELDS",
           "PredictCommand", "VWCommand", "VW_ONLY_OPTIONS"]


def _apply(opts, f, group=None):
    """Decorate ``f`` with the click options ``opts``, listed in the order ``--help`` shows them,
    each in the ``--help`` section ``group`` unless it names its own (:func:`grouped`)."""
    before = len(getattr(f, "__click_params__", ()))
    for o in reversed(opts):
        f = o(f)
    if group:
        for p in f.__click_params__[before:]:
            if getattr(p, "help_group", None) is None:
                p.help_group = group
    return f


# -- grouped --help ----------------------------------------------------------------------------
# Each option belongs to the --help section of the helper that declares it (the ``group`` of
# :func:`_apply`), or to the one :func:`grouped` names; a learner option to its learners' section
# (:func:`learner_options`); anything else to its command's own section (``VWCommand``'s
# ``own_group``). A new option therefore lands in a section by where it is declared: no list
# of option names to keep in step.
INPUT, FEATURES, LEARNER, OUTPUT, REPORT, INSPECT, VW_COMPAT = (
    "Input", "Features and interactions", "Learner (every --algo)", "Output", "Progress and reports",
    "Inspection", "Accepted from VW, no effect")


def grouped(group, *decorators):
    """Decorators ``decorators`` (click options) whose options go to ``--help`` section ``group``:
    ``@grouped(FEATURES, click.option("--noconstant", ...))``."""
    def deco(f):
        return _apply(list(decorators), f, group)
    return deco


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


def _param_help(p) -> str:
    """One declaration's help with its default and range, e.g. ``... (default: 10; in 0..1024)``."""
    rng = p.range_text() if p.type in (int, float) else ""
    parts = ([] if p.default is None or p.type is bool else [f"default: {p.default}"]) + ([rng] if rng else [])
    return p.help + (f" ({'; '.join(parts)})" if parts else "")


def _option_help(p) -> str:
    """The help of option ``--p.name``: the declaration's help, default and range, then the learners
    that take it. An option several learners declare differently (e.g. ``--sketch_size``: Oja-SON's
    m directions in 0..1024, FD-SON's m rows) shows each learner group's own help, default and range
    (each learner enforces its own)."""
    from ..api import LEARNERS

    users = _users(p.name)
    if users is None:
        return _param_help(p)
    groups: dict = {}
    for n in users:
        q = next(q for q in LEARNERS[n].PARAMS if q.name == p.name)
        groups.setdefault(_param_help(q), []).append(n)
    return " ".join(f"{h} [{', '.join(ns)}]" for h, ns in groups.items())


def learner_options(f):
    """Decorator adding one click option per learner hyper-parameter (default None = unset)."""
    params = learner_params()
    for p in reversed(params):
        help_txt = _option_help(p)
        users = _users(p.name)
        if p.type is bool:
            opt = click.option(*_names(p.name, p.short), p.name, is_flag=True, default=None, help=help_txt)
        elif isinstance(p.type, tuple):
            opt = click.option(*_names(p.name, p.short), p.name, type=click.Choice(p.type), default=None,
                               help=help_txt)
        else:
            opt = click.option(*_names(p.name, p.short), p.name, type=p.type, default=None, help=help_txt)
        every = users is None or len(users) == len(algo_names())  # COMMON_PARAMS, or declared by each learner
        f = _apply([opt], f, LEARNER if every else "Learner: " + ", ".join(users))
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
        grouped(REPORT,
                click.option("-P", "--progress", "progress", multiple=True, metavar="MODE|N",
                             default=(), show_default="auto, 2.0",
                             help="How progress is shown: auto (a bar with an ETA when stderr is a terminal "
                                  "and the input's size is known: bytes of files, compressed for gzip, rows "
                                  "of Parquet; else VW's table), bar, table or off (--quiet: off). A number "
                                  "is VW's -P, where the table's and --history_file's rows fall: a float "
                                  "multiplies the cumulative example weight (2.0: 1, 2, 4, ...), an integer "
                                  "adds. May repeat: -P bar -P 1000."),
                click.option("--quiet", is_flag=True, help="Nothing on stderr except errors."),
                click.option("--metrics", type=click.Path(dir_okay=False, allow_dash=True), default=None,
                             help="Write the run's figures as JSON to this file ('-' = stdout)."),
                click.option("--history_file", "--history-file", "history_file",
                             type=click.Path(dir_okay=False), default=None,
                             help="Write the learning curve as JSON lines to this file (written atomically at "
                                  "the end): a header naming the learner and options, one line per progress-table "
                                  "row (examples, weighted examples, average and since-last loss, error rate, "
                                  "seconds; shown or not), and a final one. 'streamlearn plot' draws them.")),
    ]
    return _apply(opts, f, INPUT)


def limit_options(f):
    """The reader's bounds on one line's memory (train, predict, convert)."""
    from ..io.source import (MAX_EXAMPLE_FEATURES, MAX_EXAMPLE_FEATURES_LIMIT, MAX_LINE_BYTES,
                             MAX_LINE_BYTES_LIMIT)

    opts = [
        click.option("--max_line_bytes", "--max-line-bytes", "max_line_bytes",
                     type=click.IntRange(1, MAX_LINE_BYTES_LIMIT), default=MAX_LINE_BYTES, show_default=True,
                     help="The longest text line read, in bytes (256 MiB): a longer line, or a stream "
                          "without newlines (/dev/zero, a gzip bomb), stops the run with an input error "
                          "naming FILE:LINE (exit 1) instead of filling memory."),
        click.option("--max_example_features", "--max-example-features", "max_example_features",
                     type=click.IntRange(1, MAX_EXAMPLE_FEATURES_LIMIT), default=MAX_EXAMPLE_FEATURES,
                     show_default=True,
                     help="The most features one example may have, linear, constant and interactions "
                          "together (2^22): a line or Parquet row with more is malformed (skipped and "
                          "reported; --strict: exit 1), found before its -q / --cubic products are made."),
    ]
    return _apply(opts, f, INPUT)


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
                          "multiclass_logistic, bear, mission: the softmax of the class scores), and the summary adds the average multiclass "
                          "log loss."),
    ]
    return _apply(opts, f, OUTPUT)


#: the RunConfig fields of :func:`namespace_options` (stored in the model, like -q)
NAMESPACE_FIELDS = ("cubic", "interactions", "leave_duplicate_interactions", "ignore", "keep", "ignore_linear")


def namespace_options(f):
    """VW's interaction and namespace-selection flags besides -q (train only: the model keeps them)."""
    opts = [
        click.option("--cubic", "cubic", multiple=True, metavar="ABC",
                     help="Cubic interactions between namespaces starting with letters A, B and C (may "
                          "repeat; ':' is VW's wildcard: every namespace seen)."),
        click.option("--interactions", "interactions", multiple=True, metavar="ABC..",
                     help="Interactions of any order (two letters or more; may repeat; ':' wildcard). "
                          "-q, --cubic and --interactions are merged as VW 9 does: sorted, duplicates "
                          "removed ('-q ab -q ba' is one), repeated letters grouped ('aba' -> 'aab')."),
        click.option("--leave_duplicate_interactions", "--leave-duplicate-interactions",
                     "leave_duplicate_interactions", is_flag=True,
                     help="Keep interactions that repeat another's namespaces ('-q ab -q ba'; wildcards "
                          "then take every order), as VW's flag does."),
        click.option("--ignore", "ignore", multiple=True, metavar="NS",
                     help="Drop the namespaces starting with each letter of NS (' ' or '\\x20': the "
                          "default namespace; may repeat). The constant feature stays."),
        click.option("--keep", "keep", multiple=True, metavar="NS",
                     help="Keep only the namespaces starting with the letters given (may repeat; wins over "
                          "--ignore, as in VW)."),
        click.option("--ignore_linear", "--ignore-linear", "ignore_linear", multiple=True, metavar="NS",
                     help="Drop the namespaces' own (linear) features but keep them in interactions."),
    ]
    return _apply(opts, f, FEATURES)


def inspect_options(f):
    """VW's --audit / --invert_hash / --readable_model (train and predict)."""
    opts = [
        click.option("--audit", is_flag=True,
                     help="VW's audit on stdout: per example the prediction, then every feature as "
                          "ns^name:index:value:weight@G, largest |weight*value| first (weights before "
                          "the example's update; learners without a weight per hash print "
                          "ns^name:index:value). Feeds the learner one example at a time: slow."),
        click.option("--invert_hash", "--invert-hash", "invert_hash", type=click.Path(dir_okay=False),
                     default=None,
                     help="At the end, write VW's readable model with the first feature name seen for each "
                          "index (name:index:w G [N]) [adagrad]."),
        click.option("--readable_model", "--readable-model", "readable_model", type=click.Path(dir_okay=False),
                     default=None, help="At the end, write VW's readable model (header, index:w G [N]) [adagrad]."),
    ]
    return _apply(opts, f, INSPECT)


def vw_compat_options(f):
    """VW flags accepted for scripts written for VW, with no effect here (each says why)."""
    opts = [
        click.option("--holdout_off", "--holdout-off", "holdout_off", is_flag=True,
                     help="Accepted, no effect: streamlearn never holds examples out (every example is "
                          "predicted, scored, then learned, in every pass; VW holds out every 10th "
                          "example when --passes > 1)."),
        click.option("-c", "--cache", "cache", is_flag=True,
                     help="Accepted, no effect: streamlearn parses text as fast as VW reads its cache; "
                          "'streamlearn convert' to Parquet is its cache."),
        click.option("--cache_file", "--cache-file", "cache_file", default=None, metavar="FILE",
                     help="Accepted and ignored (no file is written), as -c."),
    ]
    return _apply(opts, f, VW_COMPAT)


#: Vowpal Wabbit options people type that streamlearn does not have (a usage error says so
#: instead of suggesting an unrelated option); a test checks that none is a real option
VW_ONLY_OPTIONS = frozenset("""
--kill_cache --save_resume --bfgs --ftrl --nn --lrq --decay_learning_rate
--min_prediction --max_prediction --sort_features --hash_seed --permutations --ngram --skips --redefine
--daemon --port --named_labels --ect --csoaa --csoaa_ldf --wap_ldf --compressed --hash --constant
--holdout_period --holdout_after --early_terminate --feature_mask --sparse_weights --onethread
--ring_size --example_queue_limit --affix --spelling --dictionary --bootstrap --cb --cb_explore
--cb_adf --cb_explore_adf --log_multi --recall_tree --boosting --marginal --topk --search --lda --rank
--new_mf --active --confidence --dsjson --json --chain_hash --exact_adaptive_norm --l1_state
--input_feature_regularizer --output_feature_regularizer_binary --output_feature_regularizer_text
--initial_weight --random_weights --normal_weights --sparse_weights --loss_function_weights
--total --node --unique_id --span_server --span_server_port --threads --version --audit_regressor
--ksvm --OjaNewton --svrg --coin --pistol --freegrad --conjugate_gradient --mem --termination
--hessian_on --stage_poly --autolink --lrqfa --interact --classweight --multilabel_oaa --scorer
--quadratic_interactions --experimental_full_name_interactions --dictionary_path --feature_limit
""".split())


def _close(name, possibilities):
    """Click's suggestions for an unknown ``name`` kept only when close to what was typed (a
    typo, not a different VW option), one spelling each (snake_case over kebab-case)."""
    import difflib

    key = name.replace("-", "_")
    out = []
    for p in sorted(possibilities or ()):
        pk = p.replace("-", "_")
        if difflib.SequenceMatcher(None, key, pk).ratio() >= 0.8 and pk not in [o.replace("-", "_") for o in out]:
            out.append(pk if pk.startswith("--") else p)
    return out


class VWCommand(click.Command):
    """A command whose unknown-option error does not point a VW user at an unrelated option:
    a VW option streamlearn does not have says so; other suggestions are kept only when close
    to what was typed. Its ``--help`` lists the options in sections (an option's ``help_group``,
    else ``own_group``: the command's own options), in the order they are declared."""

    def __init__(self, *args, own_group: str = "Run", **kwargs):
        super().__init__(*args, **kwargs)
        self.own_group = own_group

    def format_options(self, ctx, formatter):
        sections: dict = {}
        help_option = self.get_help_option(ctx)
        for p in self.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None:
                continue
            group = "Other" if p is help_option else getattr(p, "help_group", None) or self.own_group
            sections.setdefault(group, []).append(record)
        for group, records in sections.items():
            with formatter.section(f"{group} options" if not group.startswith(("Learner:", "Accepted"))
                                   else group):
                formatter.write_dl(records)

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as e:
            self._unknown(ctx, e)
            raise

    def _unknown(self, ctx, e):
        name = e.option_name
        if name in VW_ONLY_OPTIONS:
            raise click.NoSuchOption(
                name, message=f"No such option: {name} (a Vowpal Wabbit option streamlearn does not "
                "have; see 'For VW users' in the README)", ctx=ctx) from None
        raise click.NoSuchOption(name, possibilities=_close(name, e.possibilities), ctx=ctx) from None


class PredictCommand(VWCommand):
    """``predict``: a training option (one ``train`` has and ``predict`` not) is a usage error
    saying that the model fixes it, instead of click's bare "no such option"."""

    def _unknown(self, ctx, e):
        from .train import train
        name = e.option_name
        if any(name in p.opts or name in p.secondary_opts for p in train.params):
            raise click.UsageError(
                f"{name} is a training option: the model fixes it (its interactions, namespaces, "
                "loss and hyper-parameters); predict -i MODEL needs no other flag", ctx=ctx) from None
        super()._unknown(ctx, e)
