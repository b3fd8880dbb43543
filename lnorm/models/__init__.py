"""Network building blocks that take a normalizer from ``lnorm.normalization``."""

from lnorm.models.mlp import MLP

__all__ = ["MLP"]
