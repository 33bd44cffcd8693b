"""Check and time every example kernel on a GPU: correctness against the torch reference at
BENCH["shapes"] and BENCH["bench_shapes"] (each dtype of BENCH["dtypes"]), then the launch time
of the default configuration at each bench shape (triton.testing.do_bench, median ms), with
the achieved TFLOP/s and GB/s from BENCH["flops"] and BENCH["bytes"].

Usage: python benchmarks/examples_gpu.py [examples/kernels/softmax.py ...]
Prints one table row per (example, dtype, shape); exit status 1 if any check failed.
"""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(path: Path):
    """Import an example file as a module; return (module, bench dict)."""
    text = path.read_text(encoding="utf-8")
    name = next(line.split()[2] for line in text.splitlines()
                if line.strip().startswith("#@ bench"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return mod, ast.literal_eval(node.value)
    raise SystemExit(f"{path}: no bench dict {name}")


def main(argv: list[str]) -> int:
    import torch
    import triton
    from triton.testing import do_bench

    paths = [Path(a) for a in argv] or sorted((ROOT / "examples" / "kernels").glob("*.py"))
    print(f"torch {torch.__version__}  triton {triton.__version__}  "
          f"{torch.cuda.get_device_name()}")
    print(f"{'example':<22}{'dtype':<9}{'shape':<58}{'ok':<5}{'max_err':>9}{'ms':>9}"
          f"{'TFLOP/s':>9}{'GB/s':>8}")
    failed = 0
    for path in paths:
        mod, bench = load(path)
        launch, ref, inputs = (getattr(mod, bench[k]) for k in ("launcher", "reference",
                                                                  "inputs"))
        for dtype_name in bench["dtypes"]:
            dtype = getattr(torch, dtype_name)
            tol = bench.get("tolerance", {}).get(dtype_name, {"atol": 1e-2, "rtol": 1e-2})
            elt = torch.tensor([], dtype=dtype).element_size()
            for timed, shapes in ((False, bench["shapes"]), (True, bench["bench_shapes"])):
                for shape in shapes:
                    args = inputs(shape, dtype, "cuda", 0)
                    out, expected = launch(*args), ref(*args)
                    out = out if isinstance(out, tuple) else (out,)
                    expected = expected if isinstance(expected, tuple) else (expected,)
                    ok, err = True, 0.0
                    for o, e in zip(out, expected):
                        err = max(err, (o.float() - e.float()).abs().max().item())
                        try:
                            torch.testing.assert_close(o, e, **tol)
                        except AssertionError:
                            ok = False
                    failed += not ok
                    ms = tflops = gbs = float("nan")
                    if timed:
                        ms = do_bench(lambda: launch(*args))
                        env = {**shape, "elt": elt, "__builtins__": {}}
                        tflops = eval(bench["flops"], env) / ms / 1e9  # noqa: S307
                        gbs = eval(bench["bytes"], env) / ms / 1e6  # noqa: S307
                    shape_s = ",".join(f"{k}={v}" for k, v in shape.items())
                    print(f"{path.stem:<22}{dtype_name:<9}{shape_s:<58}{'yes' if ok else 'NO':<5}"
                          f"{err:>9.2e}{ms:>9.3f}{tflops:>9.1f}{gbs:>8.0f}", flush=True)
                    del args, out, expected
                    torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
