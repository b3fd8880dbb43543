"""Network building blocks that take a normalizer from ``lnorm.normalization``."""

from lnorm.models.lenet import LeNet
from lnorm.models.mlp import MLP

__all__ = ["LeNet", "MLP"]
