"""Test-wide settings: no wandb traffic, quiet progress bars."""

import os

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")
