"""Library exceptions. The CLI maps them to exit codes (``cli/common.py``): a
:class:`ConfigError` is a usage error (exit 2, click's usage message), every other one exit 1
with one line ``streamlearn: error: ...``."""
__all__ = ["StreamlearnError", "InputError", "ModelFileError", "ConfigError", "NumericError", "OutputError"]


class StreamlearnError(Exception):
    """Base class of every error streamlearn reports to a user."""


class InputError(StreamlearnError):
    """Unreadable / malformed input data (names the file and, where known, the line)."""


class ModelFileError(StreamlearnError):
    """A model file that is corrupt, foreign, or written by a newer format version."""


class ConfigError(StreamlearnError):
    """Options that do not fit together (an option that does not apply to the algorithm, ...)."""


class NumericError(StreamlearnError):
    """The learner's state became NaN or inf: the run stops and no model is written."""


class OutputError(StreamlearnError):
    """An output (predictions, metrics, a selection, a readable model) that cannot be written;
    the message names the path the user gave, never a temporary file."""
