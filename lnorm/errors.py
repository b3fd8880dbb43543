"""Errors the user can fix. The CLI prints their message and exits non-zero, with no
stack trace, so every message names the problem and the fix."""


class UserError(Exception):
  """Base class for bad input: a config typo, an unknown name, a conflicting workdir."""


class ConfigError(UserError):
  """A config file, argument or override is wrong."""


class WorkdirConflictError(UserError):
  """The workdir holds a run with a different config."""


class WorkdirInUseError(UserError):
  """Another process holds the workdir (``lnorm.training.workdir.hold``)."""


class DataConflictError(WorkdirConflictError):
  """The workdir holds a run trained on other data than the command now loads."""


class DivergenceError(UserError):
  """The loss or gradient norm stopped being finite, at training step ``step``."""

  def __init__(self, message: str, step: int | None = None):
    super().__init__(message)
    self.step = step


class Interrupted(UserError):
  """SIGINT or SIGTERM stopped a command on purpose, after it saved what it could.

  Nothing went wrong: the CLI prints the message (how to resume) without calling it an
  error, and exits with 130, the shell's code for a process stopped by SIGINT."""
