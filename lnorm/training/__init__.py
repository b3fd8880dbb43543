"""The training harness shared by every experiment."""
