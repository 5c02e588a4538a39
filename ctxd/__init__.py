"""ctxd: one daemon per user that knows how full each coding agent's context window is."""

__version__ = "0.1.0"
