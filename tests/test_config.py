"""[tool.kernelsight] validation (analysis/config.py): wrong types and unknown codes are errors
naming the file and the key; keys no part of the product reads are reported as warnings."""
from __future__ import annotations

import pytest

from kernelsight.analysis.config import (OTHER_LAYER_KEYS, Config, ConfigError, load_pyproject,
                                         unknown_keys)


def _load(tmp_path, body: str, warn=None) -> Config:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.kernelsight]\n" + body)
    return load_pyproject(path, warn=warn)


@pytest.mark.parametrize("body, says", [
    ('ignore = ["KS11O"]', "'ignore': not a code prefix: KS11O"),
    ('select = ["KS8"]', "'select': no diagnostic code starts with KS8"),
    ('ignore = "KS110"', "'ignore' must be a list of code prefixes (got a string"),
    ('severity = { KS999 = "error" }', "severity: unknown diagnostic code KS999"),
])
def test_unknown_code_or_wrong_type_is_an_error_naming_file_and_key(tmp_path, body, says):
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, body + "\n")
    assert str(exc.value).startswith(f"{tmp_path / 'pyproject.toml'} [tool.kernelsight]: ")
    assert says in str(exc.value)


def test_code_prefixes_are_accepted_in_any_case(tmp_path):
    assert _load(tmp_path, 'ignore = ["ks110", "KS5"]\n').ignore == ("KS110", "KS5")


def test_unknown_keys_warn_but_keys_of_the_server_and_agent_do_not(tmp_path):
    warned: list[str] = []
    config = _load(tmp_path, 'ignroe = ["KS1"]\nagent-model = "gpt"\ninlayHints = true\n'
                   'max-elements = 1024\n[tool.kernelsight.agent]\nbudget = 4\n', warned.append)
    assert config.max_elements == 1024
    assert warned == [f"{tmp_path / 'pyproject.toml'} [tool.kernelsight]: unknown key 'ignroe' "
                      "(ignored)"]


def test_keys_read_by_the_server_settings_are_known_to_the_config_check():
    from kernelsight.server.settings import _SERVER_KEYS

    assert set(_SERVER_KEYS) | {"agent"} == set(OTHER_LAYER_KEYS)
    assert unknown_keys({"debounceMs": 1, "code-lens": True, "agent": {}}) == []
