"""lnorm: Layer Normalization and Batch Layer Normalization experiments in JAX/Flax."""

__version__ = "0.1.0"
