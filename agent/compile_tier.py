"""Gate stage "compile": compile the candidate's kernels for a target GPU, no GPU needed.

How: the launcher runs on small CPU inputs while Triton's active driver is replaced by one that
reports the target (``cuda:90`` -> ``GPUTarget("cuda", 90, 32)``) and every kernel launch is
turned into a warm-up (compile, do not launch). So the kernels are specialised exactly as
Triton would for those arguments (dtypes, divisibility by 16, constexprs, num_warps,
num_stages) and compiled through TTIR, TTGIR, LLVM IR and PTX to a cubin with Triton's own
``ptxas``.

Resource report per compiled kernel: registers per thread and local memory per thread (bytes;
in a Triton kernel that is what the register allocator spilled), read from the cubin Triton
built with ``cuobjdump --dump-resource-usage`` (``ptxas -v`` on the PTX as a fallback), shared
memory (bytes, Triton's metadata), num_warps, num_stages.
The stage fails on a compile error (mapped to the candidate's file line and column), on shared
memory over the target's per-block limit, or on more registers x threads than a multiprocessor
has. Limits are from NVIDIA's CUDA C++ Programming Guide, table "Technical Specifications per
Compute Capability" (maximum shared memory per thread block, opt-in; 64 K 32-bit registers per
multiprocessor; 1024 threads per block).
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .records import StageResult

# compute capability -> the largest shared memory one block may use, in bytes (opt-in).
MAX_SHARED_BYTES = {70: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912, 89: 101376,
                    90: 232448, 100: 232448, 103: 232448, 120: 101376}
REGISTERS_PER_SM = 65536
MAX_THREADS_PER_BLOCK = 1024
MAX_CONFIGS = 8  # autotuned kernels: compile at most this many configs


def parse_target(text: str):
    """``"cuda:90"`` -> ``GPUTarget("cuda", 90, 32)``; ``"hip:gfx942"`` -> a HIP target (warp 64).

    Raises:
        ValueError: text is not ``BACKEND:ARCH``.
    """
    from triton.backends.compiler import GPUTarget

    backend, _, arch = text.partition(":")
    if not backend or not arch:
        raise ValueError(f"target {text!r} must look like 'cuda:90'")
    if backend == "cuda":
        if not arch.isdigit():
            raise ValueError(f"cuda target arch must be a number like 90, got {arch!r}")
        return GPUTarget("cuda", int(arch), 32)
    return GPUTarget(backend, arch, 64 if backend == "hip" else 32)


class NeedsDevice(RuntimeError):
    """This Triton version asked the stand-in driver for something only a real GPU has."""


class _TargetDriver:
    """Stands in for Triton's GPU driver: answers target/device/stream questions only."""

    def __init__(self, target):
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def __getattr__(self, name):
        raise NeedsDevice(f"no GPU in the compile stage (driver.{name} was asked for)")


class CompileRecorder:
    """Context manager: swaps the driver, turns launches into compiles, records each kernel."""

    def __init__(self, target, swap_driver: bool = True):
        self.target = target
        self.swap_driver = swap_driver
        self.compiled: list[tuple[str, Any]] = []
        self._saved: list = []

    def __enter__(self):
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction

        if self.swap_driver:
            self._swap(driver)
        orig_run = JITFunction.run
        recorder = self

        def run(this, *args, grid=None, warmup=False, **kwargs):
            kernel = orig_run(this, *args, grid=grid, warmup=True, **kwargs)
            name = getattr(this, "__name__", None) or getattr(getattr(this, "fn", None), "__name__", "?")
            recorder.compiled.append((name, kernel))
            return kernel

        JITFunction.run = run
        self._saved.append(("jit", orig_run))
        try:
            from triton.runtime.autotuner import Autotuner

            orig_at = Autotuner.run

            def at_run(this, *args, **kwargs):
                configs = list(getattr(this, "configs", []))[:MAX_CONFIGS]
                result = None
                for cfg in configs:
                    extra = cfg.all_kwargs() if hasattr(cfg, "all_kwargs") else dict(cfg.kwargs)
                    merged = {**kwargs, **{k: v for k, v in extra.items() if k not in kwargs}}
                    result = this.fn.run(*args, **merged)
                return result

            Autotuner.run = at_run
            self._saved.append(("autotune", orig_at))
        except ImportError:  # pragma: no cover
            pass
        return self

    def _swap(self, driver) -> None:
        # the private slot, not ``driver.active``: reading that would create the real driver,
        # which fails on a machine without a GPU
        self._saved.append(("driver", getattr(driver, "_active", None)))
        driver.set_active(_TargetDriver(self.target))

    def __exit__(self, *exc):
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction

        for what, value in reversed(self._saved):
            if what == "driver":
                driver._active = value
            elif what == "jit":
                JITFunction.run = value
            elif what == "autotune":
                from triton.runtime.autotuner import Autotuner

                Autotuner.run = value
        self._saved.clear()


def run(ctx) -> StageResult:
    """Compile the candidate for ``ctx.job["target"]`` (worker side)."""
    import torch

    target_text = ctx.job.get("target") or "cuda:90"
    try:
        target = parse_target(target_text)
    except ValueError as exc:
        return StageResult(stage="compile", ok=False, status="failed", summary=str(exc), feedback=str(exc))
    launcher, _reference, make_inputs = ctx.functions()
    shape = (ctx.job.get("shapes") or ctx.spec.shapes)[0]
    kernels: list[dict[str, Any]] = []
    seen: set[str] = set()
    dtypes = ctx.spec.dtypes
    for i, dtype_name in enumerate(dtypes):
        ctx.progress(i, len(dtypes), f"compile {dtype_name or ''}".strip())
        dtype = getattr(torch, dtype_name) if dtype_name else None
        inputs = make_inputs(dict(shape), dtype, "cpu", ctx.seed)
        rec = CompileRecorder(target)
        try:
            try:
                with rec:
                    launcher(*inputs, **ctx.launch)
            except NeedsDevice:
                if ctx.device != "cuda":
                    raise
                # This Triton wants the real driver while compiling: use the GPU's own target.
                _forget_binders(ctx.candidate_module())
                inputs = make_inputs(dict(shape), dtype, "cuda", ctx.seed)
                rec = CompileRecorder(target, swap_driver=False)
                with rec:
                    launcher(*inputs, **ctx.launch)
                target_text = "cuda (this GPU)"
        except Exception as exc:
            return _error_result(exc, ctx, target_text, dtype_name)
        for name, ck in rec.compiled:
            key = getattr(ck, "hash", None) or str(id(ck))
            if key in seen:
                continue
            seen.add(key)
            info = resource_report(ck)
            info["kernel"] = name
            info["dtype"] = dtype_name
            kernels.append(info)
    ctx.progress(len(dtypes), len(dtypes), "compiled")
    if not kernels:
        return StageResult(stage="compile", ok=False, status="failed",
                           summary="the launcher launched no Triton kernel",
                           feedback=f"calling {ctx.spec.launcher}(*inputs) compiled nothing: the launcher"
                                    " must launch the jit kernel")
    return _judge(kernels, target, target_text)


def _forget_binders(module) -> None:
    """Drop per-device binders a failed stand-in attempt left on the module's jit functions."""
    from triton.runtime.jit import JITFunction

    for value in vars(module).values():
        fn = value
        while fn is not None and not isinstance(fn, JITFunction):
            fn = getattr(fn, "fn", None)
        if isinstance(fn, JITFunction) and hasattr(fn, "device_caches"):
            fn.device_caches.clear()


def _judge(kernels, target, target_text) -> StageResult:
    cap = target.arch if isinstance(target.arch, int) else None
    smem_max = MAX_SHARED_BYTES.get(cap) if cap else None
    problems = []
    for k in kernels:
        if smem_max is not None and k["shared"] > smem_max:
            problems.append(f"{k['kernel']}: needs {k['shared']} bytes of shared memory; {target_text} allows"
                            f" {smem_max} per block (lower BLOCK sizes or num_stages)")
        threads = k["num_warps"] * 32
        if threads > MAX_THREADS_PER_BLOCK:
            problems.append(f"{k['kernel']}: {k['num_warps']} warps = {threads} threads > {MAX_THREADS_PER_BLOCK}")
        if k.get("registers") and k["registers"] * threads > REGISTERS_PER_SM:
            problems.append(f"{k['kernel']}: {k['registers']} registers x {threads} threads exceeds the"
                            f" {REGISTERS_PER_SM} registers of a multiprocessor")
    lines = [_describe(k) for k in kernels]
    main = max(kernels, key=lambda k: (k.get("registers") or 0, k["shared"]))
    data = {"target": target_text, "kernels": kernels,
            "registers": main.get("registers"), "spills": main.get("local"), "shared": main["shared"],
            "num_warps": main["num_warps"], "num_stages": main["num_stages"]}
    if problems:
        return StageResult(stage="compile", ok=False, status="failed", summary=problems[0][:300],
                           feedback="\n".join(problems + lines), data=data)
    spills = sum(k.get("local") or 0 for k in kernels)
    summary = (f"{target_text}: {main.get('registers', '?')} registers, {main['shared']} B shared, "
               f"{main['num_warps']} warps, {main['num_stages']} stages"
               + (f", {spills} B spilled" if spills else ", no spills"))
    return StageResult(stage="compile", ok=True, status="ok", summary=summary,
                       feedback="\n".join(lines), data=data)


def _describe(k) -> str:
    regs = k.get("registers")
    spill = ""
    if k.get("local"):
        spill = f", {k['local']} B of local memory per thread (registers spilled)"
    return (f"{k['kernel']} [{k.get('dtype') or ''}]: registers {regs if regs is not None else '?'}, shared"
            f" {k['shared']} B, num_warps {k['num_warps']}, num_stages {k['num_stages']}{spill}")


def resource_report(compiled) -> dict[str, Any]:
    """Registers, spills, shared memory, warps and stages of one ``CompiledKernel``.

    Registers and local memory come from the cubin (``cubin_usage``), else from ``ptxas -v`` on
    the PTX (``ptxas_usage``); None when neither tool is available.
    """
    md = compiled.metadata
    info: dict[str, Any] = {
        "shared": int(getattr(md, "shared", 0) or 0),
        "num_warps": int(getattr(md, "num_warps", 0) or 0),
        "num_stages": int(getattr(md, "num_stages", 0) or 0),
        "registers": None, "local": None, "spill_stores": None, "spill_loads": None, "stack": None,
    }
    asm = getattr(compiled, "asm", {}) or {}
    cubin = asm.get("cubin")
    if isinstance(cubin, (bytes, bytearray)) and cubin:
        info.update(cubin_usage(bytes(cubin)))
    if info["registers"] is None:
        ptx = asm.get("ptx")
        if isinstance(ptx, bytes):
            ptx = ptx.decode("utf-8", errors="replace")
        if ptx:
            info.update(ptxas_usage(ptx))
    return info


def _tool(name: str) -> str | None:
    try:
        from triton import knobs

        path = getattr(knobs.nvidia, name).path
        if path and Path(path).exists():
            return path
    except Exception:
        pass
    import triton

    cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(cand) if cand.exists() else shutil.which(name)


def cubin_usage(cubin: bytes) -> dict[str, Any]:
    """Registers, stack and local memory per thread of the cubin Triton built, read with
    ``cuobjdump --dump-resource-usage``. Local memory in a Triton kernel holds what the
    register allocator spilled (``local``, bytes per thread)."""
    tool = _tool("cuobjdump")
    if not tool:
        return {}
    with tempfile.TemporaryDirectory(prefix="ks-cubin-") as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        try:
            proc = subprocess.run([tool, "--dump-resource-usage", str(path)], capture_output=True,
                                  text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return {}
    m = re.search(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)", proc.stdout)
    if not m:
        return {}
    local = int(m.group(4))
    return {"registers": int(m.group(1)), "stack": int(m.group(2)), "local": local}


def _ptxas_path(capability: int) -> str | None:
    """The ptxas Triton itself uses for ``capability`` (newer Triton picks a newer ptxas for
    sm_90+), else Triton's bundled one, else one on PATH."""
    try:
        from triton.backends.nvidia import compiler as nv

        getter = getattr(nv, "get_ptxas", None)
        if getter is not None:
            try:
                tool = getter(capability)
            except TypeError:  # older Triton: no argument
                tool = getter()
            path = getattr(tool, "path", tool)
            if path and Path(path).exists():
                return str(path)
        from triton import knobs

        path = knobs.nvidia.ptxas.path
        if path and Path(path).exists():
            return path
    except Exception:
        pass
    import triton

    cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if cand.exists():
        return str(cand)
    return shutil.which("ptxas")


_PTX_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.M)


def ptxas_usage(ptx: str) -> dict[str, Any]:
    """Run ``ptxas -v`` on ``ptx``; returns registers, spill_stores, spill_loads, stack (bytes)."""
    m = _PTX_TARGET.search(ptx)
    if not m:
        return {}
    digits = re.sub(r"\D", "", m.group(1))
    ptxas = _ptxas_path(int(digits) if digits else 90)
    if not ptxas:
        return {}
    with tempfile.TemporaryDirectory(prefix="ks-ptxas-") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        try:
            proc = subprocess.run([ptxas, "-v", f"--gpu-name={m.group(1)}", str(src), "-o",
                                   str(Path(tmp) / "k.cubin")], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            return {}
    log = proc.stderr + proc.stdout
    out: dict[str, Any] = {}
    if (r := re.search(r"Used (\d+) registers", log)):
        out["registers"] = int(r.group(1))
    if (r := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)):
        out["spill_stores"], out["spill_loads"] = int(r.group(1)), int(r.group(2))
        out["local"] = out["spill_stores"]
    if (r := re.search(r"(\d+) bytes stack frame", log)):
        out["stack"] = int(r.group(1))
    return out


# --- compile errors ----------------------------------------------------------------------------

_AT = re.compile(r"at (\d+):(\d+):\s*\n(?P<snippet>.*)", re.S)


def _def_lines(source: str) -> dict[str, int]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {n.name: n.lineno for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def map_compile_error(exc: BaseException, source: str, filename: str) -> tuple[str, list[dict[str, Any]]]:
    """Text naming ``filename:line:col`` for each Triton CompilationError in the exception chain
    (outermost call site first, the innermost cause last), with the offending source line.

    Triton reports ``at R:C`` relative to the jit function's ``def`` line (R = 1) followed by
    the function's source up to that line; the ``def NAME(`` of that snippet names the function.
    """
    defs = _def_lines(source)
    lines = source.splitlines()
    chain = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    out, locs = [], []
    for e in chain:
        text = str(e)
        m = _AT.match(text.strip()) or _AT.search(text)
        if not m:
            continue
        rel, col = int(m.group(1)), int(m.group(2))
        snippet = m.group("snippet")
        fm = re.search(r"def\s+(\w+)\s*\(", snippet)
        fn = fm.group(1) if fm else None
        message = getattr(e, "error_message", None) or _after_caret(snippet)
        if fn in defs:
            line = defs[fn] + rel - 1
            src_line = lines[line - 1] if 0 < line <= len(lines) else ""
            out.append(f"{filename}:{line}:{col + 1}: in {fn}: {message}\n    {line} | {src_line.rstrip()}")
            locs.append({"line": line, "col": col + 1, "function": fn, "message": message})
        else:
            out.append(f"{filename}: {message}")
    return "\n".join(out), locs


def _after_caret(snippet: str) -> str:
    parts = snippet.split("\n")
    for i, l in enumerate(parts):
        if l.strip().startswith("^"):
            rest = "\n".join(parts[i + 1:]).strip()
            return rest.splitlines()[0] if rest else ""
    return parts[-1].strip() if parts else ""


def _error_result(exc: BaseException, ctx, target_text: str, dtype_name) -> StageResult:
    from .worker import format_exception

    filename = Path(ctx.spec.path).name
    mapped, locs = map_compile_error(exc, ctx.job["source"], filename)
    kind = type(exc).__name__
    if mapped:
        first = locs[-1] if locs else None
        where = f" at line {first['line']}" if first else ""
        summary = f"{kind}{where}: {first['message'] if first else ''}"
        feedback = f"compiling for {target_text} ({dtype_name}) failed:\n{mapped}"
    else:
        text = format_exception(exc, ctx.source_files())
        if "ptxas" in str(exc).lower():
            text = "ptxas rejected the generated PTX:\n" + "\n".join(str(exc).splitlines()[:12])
        summary = f"{kind}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        feedback = f"compiling for {target_text} ({dtype_name}) failed:\n{text}"
    return StageResult(stage="compile", ok=False, status="failed", summary=summary[:300],
                       feedback=feedback, data={"target": target_text, "errors": locs})
