"""Shared pieces of the robustness tests (pathological inputs, mutation fuzzing, protocol
fuzzing) and of ``benchmarks/fuzz_long.py``. Not a test module itself."""
