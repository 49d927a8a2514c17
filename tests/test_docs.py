"""The man page and README stay in step with the CLI."""
import re

import click

from streamlearn.cli import cli

from conftest import ROOT


def _man_text():
    return (ROOT / "man" / "streamlearn.1").read_text().replace("\\-", "-")


def _all_options():
    for name, cmd in cli.commands.items():
        for p in cmd.params:
            if isinstance(p, click.Option):
                yield name, p


def test_man_page_lists_every_subcommand_and_option():
    man = _man_text()
    missing = []
    for name in cli.commands:
        if f"streamlearn {name}" not in man:
            missing.append(f"subcommand {name}")
    for cmd, p in _all_options():
        longs = [o for o in p.opts if o.startswith("--")]
        if longs and not any(re.search(re.escape(o) + r"(?![\w-])", man) for o in longs):
            missing.append(f"{cmd} {longs[0]}")
    assert not missing, "man/streamlearn.1 does not mention: " + ", ".join(missing)


def test_readme_starts_with_install_and_test_commands():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    assert "pip install" in blocks[0] and "streamlearn train" in blocks[0] and "sample_data/" in blocks[0]
    assert "pytest" in blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1].strip().splitlines()[-1].strip() in ci
