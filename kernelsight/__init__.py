"""Kernelsight: invariant analysis, a language server and an optimization loop for Triton."""
__version__ = "0.1.0"
