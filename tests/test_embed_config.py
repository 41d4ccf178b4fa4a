"""[providers.embeddings] and knowledge.vectors in company.toml: defaults, the endpoint's required
settings, and an error naming file, key and fix for every bad value."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import config as config_mod
from core.config import ConfigError
from core.embed.local import LocalProvider
from core.embed.openai_http import OpenAIHTTPProvider
from core.embed.registry import make_provider

FILE = Path("/tmp/company.toml")
ENDPOINT = {"provider": "openai", "base_url": "http://127.0.0.1:8089/v1", "model": "text-embedding-3-small",
            "dimensions": 1536}


def company(embeddings: dict[str, Any] | None = None, vectors: Any = None) -> config_mod.Company:
    data = config_mod.example_config()
    if embeddings is not None:
        data["providers"] = {"embeddings": embeddings}
    if vectors is not None:
        data["knowledge"] = dict(data["knowledge"], vectors=vectors)
    return config_mod.parse(data, FILE)


def refused(embeddings: dict[str, Any] | None = None, vectors: Any = None) -> ConfigError:
    with pytest.raises(ConfigError) as exc:
        company(embeddings, vectors)
    err = exc.value
    assert err.file == str(FILE) and str(err).startswith(f"{FILE}: {err.key}: ") and " — " in str(err)
    return err


def test_no_table_is_the_local_model_with_vectors_on():
    c = company()
    assert c.knowledge.vectors is True
    assert (c.embeddings.provider, c.embeddings.model, c.embeddings.dimensions) == ("local", "all-MiniLM-L6-v2-int8", 384)
    provider = make_provider(c, threads=1)
    assert isinstance(provider, LocalProvider) and provider.threads == 1
    assert provider.space.key().startswith("local:all-MiniLM-L6-v2-int8:384:")


def test_vectors_false_turns_embedding_off():
    assert company(vectors=False).knowledge.vectors is False
    assert make_provider(company(vectors=False)) is None
    assert make_provider(company(ENDPOINT, vectors=False)) is None
    assert company(vectors=True).knowledge.vectors is True     # true needs no table: the local model serves


def test_an_endpoint_is_parsed_with_its_defaults_and_a_trailing_slash_dropped():
    c = company(dict(ENDPOINT, base_url="https://gateway.example/v1/", api_key_env="OPENAI_API_KEY"))
    e = c.embeddings
    assert (e.base_url, e.api_key_env, e.max_input_tokens, e.max_batch_tokens, e.max_batch_inputs) == (
        "https://gateway.example/v1", "OPENAI_API_KEY", 8192, 300_000, 128)
    provider = make_provider(c)
    assert isinstance(provider, OpenAIHTTPProvider) and provider.url == "https://gateway.example/v1/embeddings"
    assert provider.space.key() == "openai:text-embedding-3-small:1536"


def test_local_accepts_its_own_name_width_and_a_request_size():
    c = company({"provider": "local", "model": "all-MiniLM-L6-v2-int8", "dimensions": 384, "max_batch_inputs": 16})
    provider = make_provider(c, threads=1)
    assert isinstance(provider, LocalProvider) and provider.limits.max_batch_inputs == 16


@pytest.mark.parametrize("embeddings, key, words", [
    ({"provider": "cohere"}, "providers.embeddings.provider", '"local"'),
    ({"provider": "openai"}, "providers.embeddings.base_url", "dimensions = 1536"),
    ({k: v for k, v in ENDPOINT.items() if k != "model"}, "providers.embeddings.model", 'model = "'),
    ({k: v for k, v in ENDPOINT.items() if k != "dimensions"}, "providers.embeddings.dimensions", "dimensions = 1536"),
    (dict(ENDPOINT, base_url="127.0.0.1:8089/v1"), "providers.embeddings.base_url", "scheme"),
    (dict(ENDPOINT, model=""), "providers.embeddings.model", "name the endpoint's model"),
    (dict(ENDPOINT, dimensions="1536"), "providers.embeddings.dimensions", "whole number"),
    (dict(ENDPOINT, dimensions=True), "providers.embeddings.dimensions", "whole number"),
    (dict(ENDPOINT, dimensions=0), "providers.embeddings.dimensions", "from 1 to 65536"),
    (dict(ENDPOINT, max_batch_inputs=129), "providers.embeddings.max_batch_inputs", "from 1 to 128"),
    (dict(ENDPOINT, max_input_tokens=0), "providers.embeddings.max_input_tokens", "at least 1"),
    (dict(ENDPOINT, max_batch_tokens=-5), "providers.embeddings.max_batch_tokens", "at least 1"),
    (dict(ENDPOINT, api_key_env="my key"), "providers.embeddings.api_key_env", 'api_key_env = "OPENAI_API_KEY"'),
    (dict(ENDPOINT, url="http://x"), "providers.embeddings.url", "base_url"),
    ({"provider": "local", "base_url": "http://x"}, "providers.embeddings.base_url", "remove it"),
    ({"provider": "local", "model": "bge-small"}, "providers.embeddings.model", 'provider = "openai"'),
    ({"provider": "local", "dimensions": 768}, "providers.embeddings.dimensions", "384"),
    ("local", "providers.embeddings", "a table"),
])
def test_a_bad_value_names_its_key_and_the_fix(embeddings, key, words):
    err = refused(embeddings)
    assert err.key == key and words in str(err), str(err)


def test_a_key_pasted_into_api_key_env_is_named_as_a_key_and_not_repeated_as_a_name():
    err = refused(dict(ENDPOINT, api_key_env="sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"))
    assert "looks like a key" in err.problem and "rotate the key" in err.fix


def test_a_missing_setting_says_which_ones():
    err = refused({"provider": "openai", "model": "m"})
    assert "needs base_url, dimensions" in err.problem


def test_vectors_must_be_a_bool():
    err = refused(vectors="yes")
    assert err.key == "knowledge.vectors" and "true or false" in err.fix


def test_the_file_round_trips_through_load(tmp_path):
    f = tmp_path / "company.toml"
    f.write_text('operator = "alex"\n[actors.alex]\nadmin = true\n[knowledge]\nvectors = false\n'
                 '[providers.embeddings]\nprovider = "openai"\nbase_url = "http://127.0.0.1:8089/v1"\n'
                 'model = "m"\ndimensions = 64\napi_key_env = "EMBED_KEY"\nmax_batch_inputs = 32\n', encoding="utf-8")
    c = config_mod.load(f)
    assert c.knowledge.vectors is False
    assert (c.embeddings.provider, c.embeddings.dimensions, c.embeddings.max_batch_inputs) == ("openai", 64, 32)
