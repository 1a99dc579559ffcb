"""Sources from configuration: every source type, and every bad input as an error naming the source."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from evident.connectors.config import SOURCE_TYPES, Defaults, build_sources, parse_settings
from evident.connectors.index.retriever import LocalCorpusRetriever
from evident.connectors.remote.confluence import ConfluenceRetriever
from evident.connectors.remote.mediawiki import MediaWikiRetriever
from evident.connectors.source import SourceConfigError
from evident.context import EvidentContext
from evident.settings import ConfigError


class KeywordRetriever(BaseRetriever):
    """A third-party-style retriever, loaded by import path in these tests."""

    api_key: str = ""
    prefix: str = "https://kb.example/"

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=f"Answer about {query}.", metadata={"source": self.prefix + "a"})]


def make_keyword_retriever(**kwargs: Any) -> KeywordRetriever:
    return KeywordRetriever(**kwargs)


def exploding_factory(api_key: str) -> KeywordRetriever:
    raise RuntimeError(f"bad key {api_key}")


NOT_A_RETRIEVER = 42
INSTANCE = KeywordRetriever(prefix="https://instance.example/")


def build(*raw: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    return build_sources(list(raw), Defaults(k=5, timeout_s=7))


def test_every_type_builds(tmp_path: Path, examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIKI_TOKEN", "wiki-token-1")
    monkeypatch.setenv("CONF_EMAIL", "bot@example.com")
    monkeypatch.setenv("CONF_TOKEN", "conf-token-1")
    monkeypatch.setenv("KB_KEY", "kb-key-1")
    sources, errors = build(
        {"name": "policies", "type": "local", "paths": [str(examples / "policies")], "source_type": "policy",
         "index_path": str(tmp_path / "p.sqlite3"), "weight": 2.0, "default_acl": "deny", "acl": ["group:staff"]},
        {"name": "wiki", "type": "mediawiki", "url": "https://wiki.example/w/api.php", "token_env": "WIKI_TOKEN",
         "check_read_rights": True, "timeout_s": 3},
        {"name": "conf", "type": "confluence", "url": "https://acme.atlassian.net/wiki", "email_env": "CONF_EMAIL",
         "token_env": "CONF_TOKEN", "spaces": ["ENG"], "check_permissions": True, "k": 3},
        {"name": "kb", "type": "langchain", "retriever": f"{__name__}:make_keyword_retriever",
         "kwargs": {"prefix": "https://kb2.example/"}, "kwargs_env": {"api_key": "KB_KEY"}},
        {"name": "kb-class", "type": "langchain", "retriever": f"{__name__}.KeywordRetriever"},
        {"name": "kb-instance", "type": "langchain", "retriever": f"{__name__}:INSTANCE"},
    )
    assert errors == []
    by_name = {s.name: s for s in sources}
    policies = by_name["policies"]
    assert isinstance(policies.retriever, LocalCorpusRetriever) and policies.retriever.source_name == "policies"
    assert (policies.source_type, policies.k, policies.timeout_s, policies.weight) == ("policy", 5, 7, 2.0)
    assert (policies.default_acl, policies.acl) == ("deny", ["group:staff"])
    wiki = by_name["wiki"]
    assert isinstance(wiki.retriever, MediaWikiRetriever) and wiki.timeout_s == 3 and wiki.source_type == "wiki"
    assert wiki.retriever.token is not None and wiki.retriever.token.get_secret_value() == "wiki-token-1"
    assert wiki.retriever.timeout_s == 3 and wiki.retriever.check_read_rights
    conf = by_name["conf"].retriever
    assert isinstance(conf, ConfluenceRetriever) and conf.deployment == "cloud" and conf.k == 3
    assert conf.email == "bot@example.com" and conf.spaces == ["ENG"]
    assert "conf-token-1" not in repr(conf) and "conf-token-1" not in repr(by_name["conf"])
    kb = by_name["kb"].retriever
    assert isinstance(kb, KeywordRetriever) and kb.api_key == "kb-key-1" and kb.prefix == "https://kb2.example/"
    assert [s.get_secret_value() for s in by_name["kb"].secrets] == ["kb-key-1"]
    assert by_name["kb-instance"].retriever is INSTANCE


@pytest.mark.parametrize(
    ("raw", "source", "message"),
    [
        ({"name": "sp", "type": "sharepoint"}, "sp",
         "unknown source type 'sharepoint' (expected one of: confluence, docs"),
        ({"name": "x"}, "x", "missing 'type'"),
        ({"type": "local", "paths": ["."]}, "#1", "name: Field required"),
        ("wiki", "#1", "a source must be a table of settings"),
        ({"name": "w", "type": "mediawiki", "url": "https://w/api.php", "tiemout_s": 3}, "w",
         "tiemout_s: unknown setting"),
        ({"name": "w", "type": "mediawiki", "url": "https://w/api.php", "k": 0}, "w",
         "k: Input should be greater than"),
        ({"name": "w", "type": "mediawiki", "url": "wiki.example/api.php"}, "w", "url must be an absolute http(s) URL"),
        ({"name": "w", "type": "mediawiki", "url": "https://u:pw@w/api.php"}, "w", "must not contain credentials"),
        ({"name": "w", "type": "mediawiki", "url": "https://w/api.php", "token_env": "NO_SUCH_VAR_EVIDENT"}, "w",
         "missing credential: environment variable NO_SUCH_VAR_EVIDENT (OAuth access token) is not set"),
        ({"name": "w", "type": "mediawiki", "url": "https://w/api.php", "username_env": "U"}, "w",
         "username_env and password_env go together"),
        ({"name": "c", "type": "confluence", "url": "https://c.example", "token_env": "NO_SUCH_VAR_EVIDENT",
          "check_permissions": True}, "c", "check_permissions needs Confluence Cloud"),
        ({"name": "c", "type": "confluence", "url": "https://x.atlassian.net/wiki", "token_env": "T"}, "c",
         "needs both email_env and token_env"),
        ({"name": "d", "type": "docs"}, "d", "give a sitemap or start_urls"),
        ({"name": "d", "type": "docs", "sitemap": "ftp://d/sitemap.xml"}, "d", "must be an absolute http(s) URL"),
        ({"name": "l", "type": "local", "paths": ["/no/such/folder"]}, "l",
         "/no/such/folder: no such file or directory"),
        ({"name": "a", "type": "local", "paths": ["."], "acl": {"roles": ["x"]}}, "a", "acl: acl object needs"),
        ({"name": "a", "type": "local", "paths": ["."], "default_acl": "private"}, "a", "default_acl: Input should be"),
        ({"name": "lc", "type": "langchain", "retriever": "no_such_module_evident:R"}, "lc",
         "cannot import no_such_module_evident: ModuleNotFoundError"),
        ({"name": "lc", "type": "langchain", "retriever": f"{__name__}:Nope"}, "lc", "has no attribute 'Nope'"),
        ({"name": "lc", "type": "langchain", "retriever": f"{__name__}:NOT_A_RETRIEVER"}, "lc",
         "is not a LangChain BaseRetriever"),
        ({"name": "lc", "type": "langchain", "retriever": "evident.connectors.acl:parse_acl"}, "lc",
         "parse_acl(...) failed"),
        ({"name": "lc", "type": "langchain", "retriever": "nodots"}, "lc", "must be 'package.module:attribute'"),
        ({"name": "lc", "type": "langchain", "retriever": f"{__name__}:make_keyword_retriever",
          "kwargs_env": {"api_key": ""}}, "lc", "kwargs_env.api_key: name an environment variable"),
        # A setting of another type is unknown to this one, named without the union's tag.
        ({"name": "l", "type": "local", "paths": ["."], "url": "https://w/api.php"}, "l", "url: unknown setting"),
        ({"name": "p", "type": "postgres", "paths": ["."], "schema": "Bad-Name"}, "p", "schema: String should match"),
    ],
)
def test_bad_source_settings_name_the_source(raw: Any, source: str, message: str) -> None:
    sources, errors = build(raw)
    assert sources == []
    assert len(errors) == 1 and errors[0].source == source and errors[0].kind == "config"
    assert message in errors[0].message, errors[0].message


def test_secrets_never_reach_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_KEY", "very-secret-kb-key")
    _, errors = build({"name": "lc", "type": "langchain", "retriever": f"{__name__}:exploding_factory",
                       "kwargs_env": {"api_key": "KB_KEY"}})
    assert "RuntimeError: bad key ***" in errors[0].message and "very-secret" not in errors[0].message


def test_one_bad_source_does_not_stop_the_others(examples: Path) -> None:
    sources, errors = build(
        {"name": "a", "type": "local", "paths": [str(examples / "wiki")]},
        {"name": "b", "type": "nope"},
        {"name": "a", "type": "local", "paths": [str(examples / "policies")]},
    )
    assert [s.name for s in sources] == ["a"]
    assert [(e.source, e.message) for e in errors] == [
        ("b", "unknown source type 'nope' (expected one of: confluence, docs, langchain, loader, local, mediawiki, "
              "postgres)"),
        ("a", "another source has the same name"),
    ]


def test_docs_source_needs_a_crawl_first(tmp_path: Path) -> None:
    _, errors = build({"name": "d", "type": "docs", "sitemap": "https://docs.example/sitemap.xml",
                       "index_path": str(tmp_path / "d.sqlite3")})
    assert "has not been crawled yet" in errors[0].message and "evident index --config" in errors[0].message


def test_toml_sources_with_relative_paths(tmp_path: Path, examples: Path) -> None:
    corpus = tmp_path / "kb"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nSome text.\n", encoding="utf-8")
    config = tmp_path / "evident.toml"
    config.write_text(
        'top_n = 4\n\n[[sources]]\nname = "kb"\ntype = "local"\npaths = ["kb"]\nindex_path = "idx/kb.sqlite3"\n\n'
        '[[sources]]\nname = "wiki"\ntype = "mediawiki"\nurl = "https://wiki.example/w/api.php"\n',
        encoding="utf-8",
    )
    ctx = EvidentContext.from_env(config)
    assert ctx.top_n == 4 and [s["name"] for s in ctx.sources] == ["kb", "wiki"]
    settings = parse_settings(ctx.sources[0], 1)
    assert settings.path("kb") == tmp_path / "kb"
    sources, errors = build_sources(ctx.sources, Defaults())
    assert errors == [] and (tmp_path / "idx" / "kb.sqlite3").exists()

    config.write_text('[sources.wiki]\ntype = "mediawiki"\nurl = "https://wiki.example/w/api.php"\n', encoding="utf-8")
    assert EvidentContext.from_env(config).sources[0]["name"] == "wiki"
    config.write_text("sources = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="sources"):
        EvidentContext.from_env(config)


def test_each_type_is_one_settings_class_of_the_union() -> None:
    """Parsing picks the class by `type`, and every class of the union builds a retriever of its own."""
    minimal: dict[str, dict[str, Any]] = {
        "confluence": {"url": "https://c.example"}, "docs": {"sitemap": "https://d.example/sitemap.xml"},
        "langchain": {"retriever": f"{__name__}:KeywordRetriever"}, "loader": {"loader": f"{__name__}:X"},
        "local": {"paths": ["."]}, "mediawiki": {"url": "https://w.example/api.php"},
        "postgres": {"paths": ["."], "dsn_env": "PG_DSN"},
    }
    assert sorted(minimal) == list(SOURCE_TYPES)
    classes = set()
    for kind, extra in minimal.items():
        settings = parse_settings({"name": kind, "type": kind, **extra}, 1)
        assert settings.type == kind
        assert "build" not in getattr(type(settings), "__abstractmethods__", set())
        classes.add(type(settings))
    assert len(classes) == len(SOURCE_TYPES)


def test_parse_settings_rejects_non_string_type() -> None:
    with pytest.raises(SourceConfigError, match="missing 'type'"):
        parse_settings({"name": "x", "type": 3}, 1)
