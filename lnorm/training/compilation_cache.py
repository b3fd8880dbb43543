"""JAX's persistent compilation cache, in lnorm's cache folder and on by default.

Short runs are mostly compilation: the attentive reader's 20-update run at scale=cpu
compiled its train step once per length bucket for most of its time, and every rerun
compiled the same programs again. With the cache, a rerun of a config (or a sweep
member that shares its shapes with another) loads them from disk instead.

The cache lives beside the decoded data, in ``<cache folder>/jax``
(``lnorm.data.cache.cache_dir``: ``$LNORM_CACHE_DIR``, else ``$XDG_CACHE_HOME/lnorm``,
else ``~/.cache/lnorm``). ``$LNORM_COMPILATION_CACHE=0`` turns it off; a cache folder
chosen for JAX itself (``$JAX_COMPILATION_CACHE_DIR`` or ``jax.config``) is left as it
is. JAX keys each entry by the program, the JAX and XLA versions and the compile
options, so a stale entry is never used; deleting the folder is always safe.
"""

from __future__ import annotations

import logging
import os

import jax

from lnorm.data import cache

#: Set to 0 (or off, false, no) to compile everything afresh in every run.
ENV = "LNORM_COMPILATION_CACHE"
#: The sub-folder of lnorm's cache folder that holds the compiled programs.
SUBDIR = "jax"
_OFF = ("0", "off", "false", "no")


def enable() -> str | None:
  """Turns the cache on, unless ``$LNORM_COMPILATION_CACHE`` turns it off; returns the
  folder in use, None when off. Call it before the first compilation worth keeping."""
  if os.environ.get(ENV, "1").strip().lower() in _OFF:
    return None
  chosen = jax.config.jax_compilation_cache_dir
  if chosen:
    return chosen
  path = os.path.join(cache.cache_dir(), SUBDIR)
  jax.config.update("jax_compilation_cache_dir", path)
  # JAX keeps only programs that took a second or more to compile by default: a small
  # model's steps and evaluations compile faster than that, but there are dozens of
  # them (one per length bucket and fused-call size), and together they are the rerun's
  # wait. Keep every program, however small.
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
  logging.info("Compiled programs are cached in %s (%s=0 turns this off).", path, ENV)
  return path
