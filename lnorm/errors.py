"""Errors the user can fix. The CLI prints their message and exits non-zero, with no
stack trace, so every message names the problem and the fix."""


class UserError(Exception):
  """Base class for bad input: a config typo, an unknown name, a conflicting workdir."""


class ConfigError(UserError):
  """A config file, argument or override is wrong."""


class WorkdirConflictError(UserError):
  """The workdir holds a run with a different config."""


class DivergenceError(UserError):
  """The loss or gradient norm stopped being finite."""
