"""The tl.* table read from triton's source with ``ast`` (no import of triton): coverage and
agreement with the bundled, import-made table, exact output on small fake packages, and the
server's use of it when the installed triton differs from the bundled version."""
from __future__ import annotations

import inspect
import json
import logging
import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from kernelsight.server import gen_tl_table
from kernelsight.server.gen_tl_table import build_table_from_source
from kernelsight.server.tl_docs import merge_bundled_docs

BUNDLED = Path(gen_tl_table.OUT)

# The bundled table was made by importing triton; a @triton.jit function there shows the
# JITFunction wrapper's generic signature, which names no parameter of the function.
JIT_WRAPPER_PARAMS = ["args", "kwargs"]


def _installed_triton() -> str | None:
    try:
        return version("triton")
    except PackageNotFoundError:
        return None


def _bundled() -> dict:
    return json.loads(BUNDLED.read_text(encoding="utf-8"))


needs_bundled_version = pytest.mark.skipif(
    _installed_triton() != _bundled()["triton_version"],
    reason="compares against the bundled table, which is for another triton version")


@pytest.fixture(scope="module")
def source_table() -> dict:
    if _installed_triton() is None:
        pytest.skip("triton is not installed")
    return build_table_from_source()


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def _agreement(source: dict, bundled: dict) -> dict:
    functions = {n: e for n, e in bundled["members"].items() if e["kind"] == "function"}
    covered = [n for n in functions
               if source["members"].get(n, {}).get("kind") == "function"]
    agree = [n for n in covered if source["members"][n]["params"] == functions[n]["params"]]
    informative = [n for n in covered if functions[n]["params"] != JIT_WRAPPER_PARAMS]
    agree_informative = [n for n in informative if n in agree]
    return {"functions": len(functions), "covered": len(covered), "agree": len(agree),
            "informative": len(informative), "agree_informative": len(agree_informative),
            "disagree": sorted(set(covered) - set(agree))}


@needs_bundled_version
def test_source_table_covers_the_bundled_functions_with_the_same_parameters(source_table):
    stats = _agreement(source_table, _bundled())
    print("tl function members:", stats)
    assert stats["covered"] >= 0.9 * stats["functions"], stats
    assert stats["agree_informative"] >= 0.9 * stats["informative"], stats
    # every other disagreement is a jit function, where the source has the real parameters
    for name in stats["disagree"]:
        if _bundled()["members"][name]["params"] == JIT_WRAPPER_PARAMS:
            assert source_table["members"][name]["params"] != JIT_WRAPPER_PARAMS, name


@needs_bundled_version
def test_source_table_has_the_same_member_names_and_kinds_as_the_bundled_one(source_table):
    bundled = _bundled()["members"]
    assert set(source_table["members"]) == set(bundled)
    same_kind = [n for n in bundled if source_table["members"][n]["kind"] == bundled[n]["kind"]]
    assert len(same_kind) >= 0.95 * len(bundled)


def test_source_table_gives_load_its_pointer_mask_other_parameters_and_docs(source_table):
    assert source_table["triton_version"] == _installed_triton()
    load = source_table["members"]["load"]
    assert load["kind"] == "function"
    assert load["signature"].startswith("load(pointer, mask=None, other=None, ")
    assert "_semantic" not in load["signature"]
    assert load["params"][:3] == ["pointer", "mask", "other"]
    assert {"pointer", "mask", "other"} <= set(load["param_docs"])
    assert "memory" in load["doc"]


def test_source_table_quotes_annotations_of_future_annotations_modules(source_table):
    # core.py has ``from __future__ import annotations``: inspect shows them as strings
    assert source_table["members"]["add"]["signature"] == \
        "add(x, y, sanitize_overflow: 'constexpr' = True)"
    assert source_table["members"]["float16"] == {
        "kind": "constant", "signature": "float16: dtype", "doc": ""}
    assert source_table["members"]["math"]["kind"] == "module"


def test_building_from_source_neither_imports_nor_maps_triton():
    if _installed_triton() is None:
        pytest.skip("triton is not installed")
    code = textwrap.dedent("""
        import sys
        from kernelsight.server.gen_tl_table import build_table_from_source
        table = build_table_from_source()
        assert len(table["members"]) > 100, len(table["members"])
        loaded = sorted(m for m in sys.modules if m == "triton" or m.startswith("triton."))
        assert not loaded, loaded
        maps = open("/proc/self/maps").read()
        assert "libtriton" not in maps
        print("ok", table["triton_version"])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")


def test_server_docs_for_a_differing_triton_come_from_source_without_importing_it(tmp_path):
    if _installed_triton() is None:
        pytest.skip("triton is not installed")
    bundled = {"triton_version": "0.0.1-test", "members": {
        "exp": {"kind": "function", "signature": "exp(x)", "params": ["x"],
                "doc": "Old description of exp.", "param_docs": {"x": "old x"}},
        "load": {"kind": "function", "signature": "load(p)", "params": ["p"],
                 "doc": "Old load.", "param_docs": {}}}}
    table = tmp_path / "tl.json"
    table.write_text(json.dumps(bundled), encoding="utf-8")
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from kernelsight.server.tl_docs import TlDocs
        docs = TlDocs(Path({str(table)!r}))
        docs.members()
        deadline = time.monotonic() + 30
        while docs._installed is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert docs._installed is not None, "the installed triton's table never came"
        assert "triton" not in sys.modules
        print(docs.markdown("load"))
        print("=====")
        print(docs.markdown("exp"))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    load_md, exp_md = done.stdout.split("=====\n")
    installed = _installed_triton()
    assert "tl.load(pointer, mask=None, other=None" in load_md
    assert "Old load." not in load_md
    assert f"*triton {installed}*" in load_md
    # exp's docstring is written by a decorator at import time: the bundled one fills in
    assert "Old description of exp." in exp_md and "`x`: old x" in exp_md
    assert f"*triton {installed}, description from triton 0.0.1-test*" in exp_md


FAKE = {
    "triton/__init__.py": """
        __version__ = "9.8.7"
    """,
    "triton/language/__init__.py": '''
        """Fake tl."""
        from . import extra
        from .core import (
            load,
            arange as iota,
            Box,
            BLOCK,
            f16,
            _private,
        )
        from .helpers import *
        from .missing import ghost
        import os

        LOCAL = "x"
        __all__ = ["load", "iota", "Box", "BLOCK", "f16", "helper", "nowhere"]
    ''',
    "triton/language/core.py": '''
        from __future__ import annotations


        class dtype:
            def __init__(self, name):
                self.name = name


        class Box(dtype):
            """A box.

            :param size: how many items fit
            """
            def __init__(self, size: int, *, _owner=None, tag="b"):
                pass


        def load(pointer, mask=None, other=None, *, cache: str = "", _semantic=None):
            """Load values from memory.

            :param pointer: where to read
            :param mask: which lanes read
            :type mask: Block
            :param _semantic: internal
            """


        def _arange_impl(start, end, _semantic=None):
            """Counts from start to end."""


        arange = _arange_impl
        BLOCK = 128
        f16 = dtype("fp16")
        _private = 1
    ''',
    "triton/language/helpers.py": '''
        __all__ = ["helper"]


        def helper(x, /, y, *rest, **opts):
            return x


        def not_exported():
            pass
    ''',
    "triton/language/extra/__init__.py": "",
}

EXPECTED = {
    "triton_version": "9.8.7",
    "members": {
        "BLOCK": {"kind": "constant", "signature": "BLOCK: int", "doc": ""},
        "Box": {"kind": "class", "signature": "Box(size: 'int', *, tag='b')",
                "params": ["size", "tag"], "doc": "A box.",
                "param_docs": {"size": "how many items fit"}},
        "LOCAL": {"kind": "constant", "signature": "LOCAL: str", "doc": ""},
        "core": {"kind": "module", "signature": "core: module", "doc": ""},
        "extra": {"kind": "module", "signature": "extra: module", "doc": ""},
        "f16": {"kind": "constant", "signature": "f16: dtype", "doc": ""},
        "helper": {"kind": "function", "signature": "helper(x, /, y, *rest, **opts)",
                   "params": ["x", "y", "rest", "opts"], "doc": "", "param_docs": {}},
        "helpers": {"kind": "module", "signature": "helpers: module", "doc": ""},
        "iota": {"kind": "function", "signature": "iota(start, end)",
                 "params": ["start", "end"], "doc": "Counts from start to end.",
                 "param_docs": {}},
        "load": {"kind": "function",
                 "signature": "load(pointer, mask=None, other=None, *, cache: 'str' = '')",
                 "params": ["pointer", "mask", "other", "cache"],
                 "doc": "Load values from memory.",
                 "param_docs": {"pointer": "where to read", "mask": "which lanes read"}},
    },
}


def test_fake_package_gives_exactly_the_expected_table(tmp_path):
    root = _write(tmp_path, FAKE)
    assert build_table_from_source(root / "triton") == EXPECTED


def test_signature_text_matches_inspect_for_every_parameter_kind(tmp_path):
    source = textwrap.dedent('''
        def f(a, b: "int" = 2, /, c=None, *args, d, e: "str" = "e", _hidden=0, **kw): pass
        def g(_a, b, *, c): pass
        def h(a, /, *, _semantic=None): pass
        def k(*, _x=None): pass
        def m(a=1.5e-06, b=(1, 2), c=-1, d="\\n", e=None): pass
    ''')
    root = _write(tmp_path, {"triton/language/__init__.py": "from .core import f, g, h, k, m\n",
                             "triton/language/core.py": source})
    table = build_table_from_source(root / "triton")
    space: dict = {}
    exec(compile(source, "<test>", "exec", dont_inherit=True), space)  # our source, not triton
    for name in "fghkm":
        sig = inspect.signature(space[name])
        params = [p for p in sig.parameters.values() if not p.name.startswith("_")]
        assert table["members"][name]["signature"] == name + str(sig.replace(parameters=params))
        assert table["members"][name]["params"] == [p.name for p in params]


def test_a_module_that_does_not_parse_loses_only_its_own_members(tmp_path, caplog):
    files = dict(FAKE)
    files["triton/language/helpers.py"] = "def helper(x:\n    return x\n"
    root = _write(tmp_path, files)
    with caplog.at_level(logging.WARNING, logger="kernelsight.server"):
        table = build_table_from_source(root / "triton")
    expected = {k: v for k, v in EXPECTED["members"].items() if k != "helper"}
    assert table["members"] == expected
    assert any("helpers.py:1" in r.getMessage() for r in caplog.records), caplog.text


def test_a_language_init_that_does_not_parse_is_an_error_with_its_location(tmp_path):
    root = _write(tmp_path, {"triton/language/__init__.py": "from .core import (a,\n"})
    with pytest.raises(ValueError, match=r"language/__init__\.py:\d+"):
        build_table_from_source(root / "triton")


def test_no_installed_triton_is_a_module_not_found_error(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="triton"):
        build_table_from_source()


def test_import_cycles_and_self_aliases_end_without_error(tmp_path):
    root = _write(tmp_path, {
        "triton/language/__init__.py": "from .a import x, y\n",
        "triton/language/a.py": "from .b import x\ny = y\n",
        "triton/language/b.py": "from .a import x\n",
    })
    table = build_table_from_source(root / "triton")
    assert set(table["members"]) == {"a", "y"}
    assert table["members"]["y"]["kind"] == "constant"


def test_merge_fills_only_empty_docs_and_keeps_param_docs_of_current_parameters():
    table = {"triton_version": "2", "members": {
        "exp": {"kind": "function", "signature": "exp(x)", "params": ["x"], "doc": "",
                "param_docs": {}},
        "load": {"kind": "function", "signature": "load(p)", "params": ["p"], "doc": "New.",
                 "param_docs": {}},
        "new": {"kind": "function", "signature": "new()", "params": [], "doc": "",
                "param_docs": {}}}}
    bundled = {"triton_version": "1", "members": {
        "exp": {"doc": "Old exp.", "param_docs": {"x": "input", "gone": "removed"}},
        "load": {"doc": "Old load.", "param_docs": {"p": "old p"}}}}
    merged = merge_bundled_docs(table, bundled)["members"]
    assert merged["exp"]["doc"] == "Old exp." and merged["exp"]["doc_version"] == "1"
    assert merged["exp"]["param_docs"] == {"x": "input"}
    assert merged["load"]["doc"] == "New." and "doc_version" not in merged["load"]
    assert merged["load"]["param_docs"] == {}
    assert merged["new"]["doc"] == "" and "doc_version" not in merged["new"]


def test_wrapped_type_field_lines_stay_out_of_the_docstring_body():
    doc = '''Store data.

    :param cache_modifier: changes cache option
    :type cache_modifier: str, optional, one of {"", ".wb"}, where ".wb" stands for
        cache write-back all coherent levels, see `cache operator
        <https://example.invalid>`_ for more details.
    :param eviction_policy: changes eviction policy
    :type eviction_policy: str, optional

    Also a member function of :py:class:`tensor`.
    '''
    text, params = gen_tl_table._clean(doc)
    assert text == "Store data.\n\nAlso a member function of `tensor`."
    assert params == {"cache_modifier": "changes cache option",
                      "eviction_policy": "changes eviction policy"}


@needs_bundled_version
def test_bundled_store_hover_doc_has_no_cache_modifier_type_text():
    store = _bundled()["members"]["store"]
    assert "write-back" not in store["doc"] and "cache operator" not in store["doc"]
    assert store["doc"].endswith("`store(x, ...)`.") and "\n\n\n" not in store["doc"]
