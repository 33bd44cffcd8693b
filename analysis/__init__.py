"""kernelsight.analysis: a pure library. Python source in, findings with counterexamples out.

It imports no lsprotocol, torch or triton (a test pins this): it starts fast and runs where no
GPU stack is installed.
"""
from .api import Analysis, analyze_path, analyze_source, hover_at
from .config import Config, ConfigError
from .model import (Counterexample, FileReport, Finding, Fix, HoverInfo, InvariantTally,
                    KernelSummary, Related, Severity, Span, TextEdit)

__all__ = ["Analysis", "analyze_path", "analyze_source", "hover_at", "Config", "ConfigError",
           "Counterexample", "FileReport", "Finding", "Fix", "HoverInfo", "InvariantTally",
           "KernelSummary", "Related", "Severity", "Span", "TextEdit"]
