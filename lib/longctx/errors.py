"""Errors with one-line, actionable messages.

Every error a user can trigger by bad input derives from :class:`LongctxError`,
so notebooks and the CLI can print ``str(err)`` alone instead of a traceback.
"""

import warnings


def warn_line(message: str) -> None:
    """A warning in one line (no source line printed under it): something skipped that the
    user should know of, while the work goes on."""
    warnings.warn_explicit(message, UserWarning, "longctx", 0)


class LongctxError(Exception):
    """Base class for user-facing errors."""


class UnknownModelError(LongctxError):
    pass


class ModelPackageMissingError(LongctxError):
    pass


class ContextTooLongError(LongctxError):
    pass


class DataFileError(LongctxError):
    pass


class ParameterError(LongctxError, ValueError):
    pass


class CapabilityError(LongctxError, ValueError):
    """A backend asked for something it cannot do (e.g. attention weights from a server)."""


class BackendError(LongctxError):
    """An inference backend failed: a server unreachable, serving another model, or erroring."""
