"""company.toml: every error names the file, the key and the fix."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import config_with

from core import config as config_mod
from core.config import ConfigError
from core.errors import CrewletError
from core.node import Node, init_home
from core.paths import Home


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _assert_names(exc: ConfigError, file: Path, key: str, *fix_words: str) -> None:
    assert exc.file == str(file)
    assert exc.key == key
    msg = str(exc)
    assert msg.startswith(f"{file}: {key}: ")
    assert " — " in msg  # problem — fix
    for w in fix_words:
        assert w in exc.fix, (w, exc.fix)


def test_bad_toml_names_the_file_the_line_and_the_fix(tmp_path):
    f = _write(tmp_path / "company.toml", 'operator = "alex"\n[spaces.ENG\nname = "x"\n')
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    _assert_names(exc.value, f, "(syntax)", "fix the TOML syntax")
    assert "line 2" in exc.value.problem


def test_a_missing_file_says_how_to_make_one(tmp_path):
    f = tmp_path / "company.toml"
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    _assert_names(exc.value, f, "(file)", "crewlet init")


def test_a_file_that_is_not_utf8(tmp_path):
    f = tmp_path / "company.toml"
    f.write_bytes(b'operator = "\xff"\n')
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    _assert_names(exc.value, f, "(file)", "UTF-8")


def test_an_unknown_actor_as_a_lead(tmp_path):
    f = tmp_path / "company.toml"
    data = config_with(spaces={"ENG": {"name": "Engineering", "lead": "ghost"}})
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(data, f)
    _assert_names(exc.value, f, "spaces.ENG.lead", "[actors.ghost]", "alex")
    assert "'ghost' is not a configured actor" in exc.value.problem


def test_an_unknown_operator(tmp_path):
    f = tmp_path / "company.toml"
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(config_with(operator="nobody"), f)
    _assert_names(exc.value, f, "operator", "[actors.nobody]")


@pytest.mark.parametrize("changes, key, fix_word", [
    ({"actors": {"sam": {"kind": "person", "admin": "yes"}}}, "actors.sam.admin", "true or false"),
    ({"actors": {"sam": {"kind": "robot"}}}, "actors.sam.kind", '"agent"'),
    ({"actors": {"Sam": {"kind": "person"}}}, "actors.Sam", "rename"),
    ({"actors": {"sam": {"space": 5}}}, "actors.sam.space", 'space = "ENG"'),
    ({"spaces": {"ENG": {"name": 7}}}, "spaces.ENG.name", 'name = "Engineering"'),
    ({"spaces": {"bad key!": {"name": "x"}}}, "spaces.bad key!", "letters"),
    ({"spaces": ["ENG"]}, "spaces", "[spaces.KEY]"),
    ({"knowledge": {"scope": "ENG"}}, "knowledge.scope", "list"),
    ({"knowledge": {"backend": "confluence"}}, "knowledge.backend", '"native"'),
    ({"providers": {"embeddings": {"provider": "openai", "model": "m", "dimensions": 8}}},
     "providers.embeddings.base_url", "base_url ="),
    ({"knowledge": {"vectors": "yes"}}, "knowledge.vectors", "true or false"),
    ({"operator": 3}, "operator", 'operator = "alex"'),
    ({"colour": "blue"}, "colour", "remove it"),
    ({"integrations": {"confluence": {"url": "x"}}}, "integrations.confluence", "remove one"),
])
def test_a_wrong_value_names_its_key_and_the_fix(tmp_path, changes, key, fix_word):
    f = tmp_path / "company.toml"
    data = config_mod.example_config()
    for k, v in changes.items():
        if k == "actors" and isinstance(v, dict) and "Sam" not in v:
            data["actors"] = {**data["actors"], **v}
        else:
            data[k] = v
    with pytest.raises(ConfigError) as exc:
        config_mod.parse(data, f)
    _assert_names(exc.value, f, key, fix_word)


def test_a_wrong_type_in_the_embeddings_provider_is_a_config_error(tmp_path):
    f = _write(tmp_path / "company.toml",
               'operator = "alex"\n[actors.alex]\nadmin = true\n'
               '[providers.embeddings]\nprovider = "openai"\nbase_url = "http://localhost:1"\nmodel = "m"\n'
               'dimensions = "many"\n')
    with pytest.raises(ConfigError) as exc:
        config_mod.load(f)
    _assert_names(exc.value, f, "providers.embeddings.dimensions")


def test_an_unknown_actor_named_by_a_writer(kb):
    with pytest.raises(ConfigError) as exc:
        kb.create_page("ENG", "x", "y", actor="ghost")
    assert exc.value.key == "actors.ghost" and "alex" in exc.value.fix


def test_a_node_refuses_to_open_on_a_bad_config_and_init_writes_nothing_bad(tmp_path):
    home = Home(tmp_path / "h")
    with pytest.raises(ConfigError):
        init_home(home, config_with(operator="nobody"))
    assert not home.config_file.exists()
    init_home(home, config_mod.example_config())
    with pytest.raises(CrewletError) as exc:
        init_home(home, config_mod.example_config())
    assert exc.value.code == "exists"
    _write(home.config_file, home.config_file.read_text() + "\n[spaces.X]\nlead = 'ghost'\n")
    with pytest.raises(ConfigError) as cexc:
        Node.open(home)
    assert cexc.value.key == "spaces.X.lead"


def test_the_written_file_round_trips(tmp_path):
    f = tmp_path / "company.toml"
    config_mod.write(f, config_mod.example_config())
    company = config_mod.load(f)
    assert company.operator == "alex" and company.actor("eng-bot").is_agent
    assert company.lead_of("PROD") == "sam" and company.activated_at > 0
    assert not list(tmp_path.glob("*.tmp"))


def test_declare_spaces_adds_only_what_is_missing(tmp_path):
    f = tmp_path / "company.toml"
    config_mod.write(f, config_mod.example_config())
    assert config_mod.declare_spaces(f, ["ENG", "OPS", "HOME", "OPS"]) == ["OPS"]
    company = config_mod.load(f)
    assert company.is_declared("OPS") and company.spaces["ENG"].name == "Engineering"
    with pytest.raises(ConfigError) as exc:
        config_mod.declare_spaces(f, ["bad key"])
    assert exc.value.key == "spaces.bad key"
