"""``streamlearn convert``: VW text / LIBSVM to Parquet (the sparse schema)."""
from __future__ import annotations

import click

from .options import limit_options

__all__ = ["convert"]


@click.command(short_help="Convert VW text / LIBSVM to Parquet.")
@click.argument("inputs", nargs=-1, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="The Parquet file to write (atomically: temporary file + rename; '-' = stdout).")
@click.option("--format", "fmt", type=click.Choice(["auto", "vw", "libsvm"]), default="auto",
              show_default=True, help="Input format (auto: sniffed from the first line).")
@click.option("--row_group_size", "--row-group-size", "row_group_size", type=click.IntRange(min=1),
              default=65536, show_default=True, help="Rows per Parquet row group (bounds reader memory).")
@click.option("--compression", type=click.Choice(["snappy", "zstd", "gzip", "lz4", "none"]),
              default="lz4", show_default=True, help="Parquet column compression (lz4 decodes fastest).")
@click.option("--no_names", "--no-names", "no_names", is_flag=True,
              help="Do not store feature names and namespaces (smaller file; -q then sees one namespace).")
@click.option("--strict", is_flag=True, help="Stop at the first malformed line (exit 1) instead of skipping it.")
@click.option("--quiet", is_flag=True, help="Nothing on stderr except errors.")
@limit_options
def convert(inputs, output, fmt, row_group_size, compression, no_names, strict, quiet, max_line_bytes,
            max_example_features):
    """Convert INPUTS (VW text or LIBSVM, gzip ok, '-' or none = stdin) to one Parquet file.

    Labels, importance weights, tags, feature hashes, values, names and namespaces are kept;
    'streamlearn train OUT.parquet' then gives the same progressive loss as on the text.
    """
    from ..api import ConvertConfig, convert as api_convert
    from .common import run_api

    cfg = ConvertConfig(inputs=list(inputs) or ["-"], output=output, fmt=fmt,
                        row_group_size=row_group_size, compression=compression,
                        names=not no_names, strict=strict, quiet=quiet, max_line_bytes=max_line_bytes,
                        max_example_features=max_example_features)
    run_api(api_convert, cfg)
