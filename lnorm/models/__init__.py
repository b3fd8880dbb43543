"""Network building blocks that take a normalizer from ``lnorm.normalization``. (A
network one experiment alone uses lives in its folder: the BLN paper's LeNet-5 in
experiments/bln_cifar/.)"""

from lnorm.models.mlp import MLP

__all__ = ["MLP"]
