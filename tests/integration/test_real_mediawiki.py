"""The MediaWiki connector against a real MediaWiki: Debian's package, installed on SQLite, served on loopback.

The wiki is private (only the `reader` group may read), as company wikis are; the connector logs in
with bot passwords. What the stand-in server cannot prove is proven here: that questions find pages
by their text, that both text modes give the page's words, that k > 50 fits the API's limits, that
login, re-login and read rights work as MediaWiki answers them, and that `evident ask --config`
answers from the wiki with spans that are the page's text. Last, the wiki's XML dump goes through
langchain-community's MWDumpLoader as a `type = "loader"` source.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from typer.testing import CliRunner

from evident.agent.recheck import recheck_citations
from evident.citations.recheck import CitationCheck
from evident.cli import app
from evident.connectors.remote.docs_index import pages_path, read_pages
from evident.connectors.remote.mediawiki import MediaWikiRetriever
from evident.connectors.revisions import pinned
from evident.connectors.source import AccessReport, Source, SourceFailure
from evident.context import EvidentContext
from evident.embeddings.meaning import SEMANTIC_WINDOWS
from evident.graph import graph
from evident.models import Citation, Principal
from tests.support.wiki_servers import MEDIAWIKI_HOME, RealMediaWiki

RUNBOOKS = 60  # more than the API's 50 page ids per request

PAGES = {
    "Deploy process": "Every deploy to production needs a green build and an approved change ticket. "
    "Deploys are frozen on Fridays after 15:00.\n\n== Rollback ==\nA rollback uses the previous release tag.",
    "Incident process": "Declare an incident in the '''#incidents''' channel.\n\n== Roles ==\n"
    "* The incident commander owns communication.\n* The scribe keeps the timeline.",
    "Oncall rotation": "The on-call engineer is paged for every incident and rotates weekly.",
    **{f"Runbook {i:02d}": f"This runbook covers service {i}.\n\n== Steps ==\n"
       "Rotate the signing credentials and record the rotation in the audit ledger." for i in range(1, RUNBOOKS + 1)},
}
# A long page whose answer lies past the opening windows that a remote page has embedded
# (evident/connectors/rerank.py, MAX_WINDOWS): about 700 words before it.
PARKING = "Visitor parking in the garage is validated at the front desk for up to four hours."
PAGES["Office handbook"] = " ".join(
    f"Chapter {i} of this handbook describes the kitchen, the mail room and the printers on floor {i}."
    for i in range(1, 41)
) + f"\n\n== Parking ==\n{PARKING}"
# What a reader sees of each page, as plain text (the words the answers must quote).
DEPLOY_TEXT = ("Every deploy to production needs a green build and an approved change ticket. "
               "Deploys are frozen on Fridays after 15:00.")


@pytest.fixture(scope="session")
def wiki(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealMediaWiki]:
    if not (MEDIAWIKI_HOME / "maintenance" / "install.php").exists():
        pytest.fail("Debian's mediawiki package is not installed: run `bash scripts/test-deps.sh` (make test does)")
    with RealMediaWiki(tmp_path_factory.mktemp("mediawiki"), PAGES) as server:
        yield server


def retriever(wiki: RealMediaWiki, bot: bool = True, **kw: Any) -> MediaWikiRetriever:
    account = wiki.bot if bot else None
    return MediaWikiRetriever(
        source_name="wiki", api_url=wiki.api_url, timeout_s=30, credential_hint="WIKI_BOT_USER / WIKI_BOT_PASSWORD",
        username=account.user if account else None, password=account.password if account else None, **kw,
    )


def write_config(wiki: RealMediaWiki, path: Path, check_read_rights: bool = False) -> None:
    """An evident.toml with the wiki as its one source, read in parse mode by the bot's account."""
    rights = "check_read_rights = true\n" if check_read_rights else ""
    path.write_text(f"""
[[sources]]
name = "wiki"
type = "mediawiki"
url = "{wiki.api_url}"
text = "parse"
username_env = "WIKI_BOT_USER"
password_env = "WIKI_BOT_PASSWORD"
{rights}""", encoding="utf-8")


def api_calls(wiki: RealMediaWiki, since: int) -> list[dict[str, str]]:
    """The query strings of the API requests the wiki served after log offset `since`."""
    calls = []
    for line in wiki.log[since:].splitlines():
        match = re.match(r"(?:GET|POST) /w/api\.php\?(\S*)", line)
        if match:
            calls.append({k: v[-1] for k, v in parse_qs(match.group(1)).items()})
    return calls


@pytest.mark.parametrize("text", ["extracts", "parse"])
def test_questions_find_pages_by_their_text(wiki: RealMediaWiki, text: str) -> None:
    since = len(wiki.log)
    # None of these words is in a title: a title search (MediaWiki's default) finds nothing.
    docs = retriever(wiki, text=text, k=3).invoke("How long are deploys frozen on Fridays?")
    assert [d.metadata["title"] for d in docs] == ["Deploy process"]
    deploy = docs[0]
    assert deploy.page_content.startswith(DEPLOY_TEXT)
    assert "Rollback" in deploy.page_content and "A rollback uses the previous release tag." in deploy.page_content
    assert "==" not in deploy.page_content and "[edit]" not in deploy.page_content
    assert deploy.metadata["url"] == f"{wiki.url}/w/index.php/Deploy_process"
    assert {"source": "wiki", "source_type": "wiki", "ns": 0}.items() <= deploy.metadata.items()
    searches = [c for c in api_calls(wiki, since) if c.get("list") == "search"]
    assert searches[0]["srwhat"] == "text"


def test_extracts_continue_page_by_page(wiki: RealMediaWiki) -> None:
    since = len(wiki.log)
    docs = retriever(wiki, text="extracts", k=5).invoke("incident")
    titles = {d.metadata["title"] for d in docs}
    assert titles == {"Incident process", "Oncall rotation"}
    incident = next(d for d in docs if d.metadata["title"] == "Incident process")
    assert incident.page_content == ("Declare an incident in the #incidents channel.\n\n\nRoles\n"
                                     "The incident commander owns communication.\nThe scribe keeps the timeline.")
    extracts = [c for c in api_calls(wiki, since) if "extracts" in c.get("prop", "")]
    # TextExtracts gives one whole page per response; the second page came through `excontinue`.
    assert len(extracts) == 2 and "excontinue" not in extracts[0] and extracts[1]["excontinue"] == "1"


def test_parse_mode_gives_clean_text(wiki: RealMediaWiki) -> None:
    docs = retriever(wiki, text="parse", k=5).invoke("incident commander scribe")
    incident = docs[0]
    assert incident.metadata["title"] == "Incident process"
    assert incident.page_content == ("Declare an incident in the #incidents channel.\n\n## Roles\n\n"
                                     "The incident commander owns communication.\nThe scribe keeps the timeline.")


@pytest.mark.parametrize(("bulk", "id_batches"), [(False, [50, 10]), (True, [60])])
def test_more_than_fifty_hits(wiki: RealMediaWiki, bulk: bool, id_batches: list[int]) -> None:
    since = len(wiki.log)
    account = wiki.bulk_bot if bulk else wiki.bot
    r = MediaWikiRetriever(source_name="wiki", api_url=wiki.api_url, timeout_s=30, k=RUNBOOKS + 5, text="parse",
                           username=account.user, password=account.password)
    docs = r.invoke("signing credentials audit ledger")
    assert len(docs) == RUNBOOKS
    assert {d.metadata["title"] for d in docs} == {f"Runbook {i:02d}" for i in range(1, RUNBOOKS + 1)}
    assert all("Rotate the signing credentials" in d.page_content for d in docs)
    # 50 page ids per request, 500 for an account with apihighlimits (the bulk bot's highvolume grant).
    info = [c for c in api_calls(wiki, since) if c.get("prop") == "info"]
    assert [len(c["pageids"].split("|")) for c in info] == id_batches


def test_bot_password_login_and_a_lost_session(wiki: RealMediaWiki) -> None:
    since = len(wiki.log)
    r = retriever(wiki)
    assert [d.metadata["title"] for d in r.invoke("approved change ticket")] == ["Deploy process"]
    r.invoke("incident commander")
    logins = [c for c in api_calls(wiki, since) if c.get("type") == "login"]
    assert len(logins) == 1  # one login, its session reused
    # The wiki forgets the session (a restart of its session store, an expiry): every request is anonymous.
    assert wiki.forget_sessions() >= 1
    assert [d.metadata["title"] for d in r.invoke("approved change ticket")] == ["Deploy process"]
    assert len([c for c in api_calls(wiki, since) if c.get("type") == "login"]) == 2
    assert all(c.get("assert") == "user" for c in api_calls(wiki, since) if c.get("list") == "search")


def test_async_gives_the_same_documents(wiki: RealMediaWiki) -> None:
    r = retriever(wiki, k=4)
    sync = r.invoke("rollback release tag")
    out = asyncio.run(r.ainvoke("rollback release tag"))
    assert sync
    assert [(d.metadata["url"], d.page_content) for d in out] == [(d.metadata["url"], d.page_content) for d in sync]


def test_wrong_bot_password_is_a_clear_failure(wiki: RealMediaWiki) -> None:
    wrong = "abcdefabcdefabcdefabcdefabcdef00"
    r = MediaWikiRetriever(source_name="wiki", api_url=wiki.api_url, timeout_s=30, username=wiki.bot.user,
                           password=wrong, credential_hint="WIKI_BOT_PASSWORD")
    with pytest.raises(SourceFailure) as err:
        r.invoke("deploy")
    assert err.value.message == (f"127.0.0.1:{wiki.port}: login failed: Incorrect username or password entered. "
                                 "Please try again.; check WIKI_BOT_PASSWORD")
    assert wrong not in err.value.message


def test_private_wiki_without_credentials(wiki: RealMediaWiki) -> None:
    with pytest.raises(SourceFailure) as err:
        retriever(wiki, bot=False).invoke("deploy")
    assert "the wiki does not let this account read through the API (readapidenied)" in err.value.message


def test_read_rights_are_the_wikis(wiki: RealMediaWiki) -> None:
    r = retriever(wiki, check_read_rights=True)
    docs = r.invoke("approved change ticket", principal=Principal(user="Alice"))
    assert [d.metadata["acl"] for d in docs] == [{"users": ["Alice"]}]
    # The wiki account may be named differently from EvidenT's user id.
    assert r.invoke("approved change ticket", principal=Principal(user="alice@corp", ids={"wiki": "Alice"}))

    for principal in (Principal(user="Mallory"), Principal(user="Nobody"), None):
        report = AccessReport()
        assert r.invoke("approved change ticket", principal=principal, report=report) == []
        assert report.denied == 1 and report.reasons == []
    report = AccessReport()
    assert r.invoke("approved change ticket", principal=Principal(groups=["eng"]), report=report) == []
    assert report.denied == 1
    assert report.reasons == ["wiki: the caller has groups but no wiki user name; MediaWiki grants reading to "
                              "accounts, so the wiki's pages are not shown"]


def test_ask_answers_from_the_wiki_with_exact_spans(wiki: RealMediaWiki, tmp_path: Path) -> None:
    write_config(wiki, tmp_path / "evident.toml", check_read_rights=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVIDENT_", "OPENAI_", "LANGSMITH_"))}
    env.update({"WIKI_BOT_USER": wiki.bot.user, "WIKI_BOT_PASSWORD": wiki.bot.password})

    def ask(*who: str) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "evident.cli", "ask", "What does a deploy to production need?", "--config",
             "evident.toml", "--json", *who], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    out = ask("--user", "Alice")
    assert out["status"] == "answered" and out["citations"]
    page = retriever(wiki, text="parse").invoke("approved change ticket")[0].page_content
    for citation in out["citations"]:
        assert citation["url"] == f"{wiki.url}/w/index.php/Deploy_process"
        assert " … ".join(page[s:e] for s, e in citation["spans"]) == citation["quote"]
    assert any("approved change ticket" in c["quote"] for c in out["citations"])
    assert wiki.bot.password not in json.dumps(out)

    denied = ask("--user", "Mallory")
    assert denied["status"] == "insufficient" and denied["citations"] == [] and denied["retrieved"] == []



@pytest.mark.embeddings
def test_an_answer_past_the_embedded_opening_of_a_long_page(wiki: RealMediaWiki, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Meaning reads a remote page's opening windows only; the text past them is judged by its words.
    # Before, its cosine counted as 0 and the answerability gate refused the question.
    write_config(wiki, tmp_path / "evident.toml")
    monkeypatch.setenv("WIKI_BOT_USER", wiki.bot.user)
    monkeypatch.setenv("WIKI_BOT_PASSWORD", wiki.bot.password)
    ctx = EvidentContext.from_env(tmp_path / "evident.toml")
    out = graph.invoke({"query": "How long is visitor parking validated at the front desk?"}, context=ctx)
    handbook = next(d for d in out["documents"] if d["title"] == "Office handbook")
    read = handbook["metadata"][SEMANTIC_WINDOWS]
    start = handbook["content"].index(PARKING)
    assert read and all(end <= start for _, end, _ in read)  # read by meaning, but not as far as the answer
    assert out["status"] == "answered", out["answer"]
    assert any(PARKING in c["quote"] for c in out["citations"])


@pytest.mark.filterwarnings("ignore:`langchain-community` is being sunset:DeprecationWarning")
def test_a_dump_of_the_wiki_through_langchains_mwdumploader(wiki: RealMediaWiki, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Bulk loading: the wiki's XML export, read by langchain-community's loader, into the embedded index.
    dump = tmp_path / "wiki-dump.xml"
    dump.write_text(wiki.maintenance("dumpBackup.php", "--current", "--quiet"), encoding="utf-8")
    (tmp_path / "evident.toml").write_text(f"""
[[sources]]
name = "wiki-dump"
type = "loader"
loader = "langchain_community.document_loaders:MWDumpLoader"
kwargs = {{ file_path = "{dump}", namespaces = [0] }}
url_template = "{wiki.url}/w/index.php/{{source}}"
index_path = "wiki-dump.sqlite3"
source_type = "wiki"
acl = "authenticated"   # a dump carries no permissions: the private wiki's pages are for signed-in readers
""", encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    def cli(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(app, [*args, "--config", "evident.toml", "--json"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return dict(json.loads(result.stdout))

    row = cli("index")["sources"][0]
    assert (row["status"], row["documents"]) == ("ok", len(PAGES) + 1)  # and the installer's Main Page
    out = cli("ask", "What does a deploy to production need?", "--user", "alice")
    assert out["status"] == "answered"
    text = next(r["text"] for r in read_pages(pages_path(tmp_path / "wiki-dump.sqlite3")).values()
                if r["url"] == f"{wiki.url}/w/index.php/Deploy%20process")
    assert text.startswith(DEPLOY_TEXT)
    deploy = [c for c in out["citations"] if c["url"] == f"{wiki.url}/w/index.php/Deploy%20process"]
    assert deploy and any("approved change ticket" in c["quote"] for c in deploy)
    assert all(" … ".join(text[s:e] for s, e in c["spans"]) == c["quote"] for c in deploy)
    assert cli("ask", "What does a deploy to production need?")["status"] == "insufficient"  # anonymous


PARENTAL = "Parental leave"
PARENTAL_TEXT = ("Parents receive 16 weeks of paid parental leave. "
                 "The leave may start up to four weeks before the birth.")


class _Editor:
    """An account that edits and deletes pages through the Action API (a bot password with those grants)."""

    def __init__(self, wiki: RealMediaWiki) -> None:
        password = "editor0123456789abcdefghijklmnop"
        wiki.maintenance("createAndPromote.php", "--sysop", "--custom-groups", "reader", "Editor", "Editor-pass-5a7c2e")
        wiki.maintenance("createBotPassword.php", "--appid", "edits", "--grants",
                         "basic,editpage,createeditmovepage,delete", "Editor", password)
        self.api = wiki.api_url
        self.client = httpx.Client(timeout=60)
        token = self._get(action="query", meta="tokens", type="login")["query"]["tokens"]["logintoken"]
        login = self._post(action="login", lgname="Editor@edits", lgpassword=password, lgtoken=token)
        assert login["login"]["result"] == "Success", login
        self.csrf = self._get(action="query", meta="tokens")["query"]["tokens"]["csrftoken"]

    def _get(self, **params: str) -> Any:
        return self.client.get(self.api, params={**params, "format": "json", "formatversion": "2"}).json()

    def _post(self, **data: str) -> Any:
        return self.client.post(self.api, data={**data, "format": "json", "formatversion": "2"}).json()

    def edit(self, title: str, text: str) -> int:
        done = self._post(action="edit", title=title, text=text, token=self.csrf, summary="test edit")
        assert done.get("edit", {}).get("result") == "Success", done
        return int(done["edit"]["newrevid"])

    def delete(self, title: str) -> None:
        done = self._post(action="delete", title=title, token=self.csrf, reason="test")
        assert "delete" in done, done


def test_a_citation_rechecked_after_edits_through_the_api(wiki: RealMediaWiki) -> None:
    editor = _Editor(wiki)
    first = editor.edit(PARENTAL, PARENTAL_TEXT)
    r = retriever(wiki, check_read_rights=True)
    source = Source(name="wiki", retriever=r)
    alice, mallory = Principal(user="Alice"), Principal(user="Mallory")
    url = f"{wiki.url}/w/index.php/Parental_leave"
    doc = r.fetch_visible(url, principal=alice)
    assert doc is not None and doc.metadata["revision"] == f"revid={first}"
    quote = "Parents receive 16 weeks of paid parental leave."
    start = doc.content.index(quote)
    citation = pinned(Citation(sentence=quote, url=url, spans=[(start, start + len(quote))], quote=quote), doc)
    assert citation.revision == f"revid={first}" and citation.content_hash == doc.content_hash

    def check(who: Principal | None) -> CitationCheck:
        [one] = recheck_citations([citation], [source], who)
        return one

    assert check(alice).outcome == "unchanged"
    assert check(mallory).outcome == "gone"  # the wiki does not let Mallory read: as if deleted

    second = editor.edit(PARENTAL, "Ask HR before you plan your leave.\n\n" + PARENTAL_TEXT)
    moved = check(alice)
    assert moved.outcome == "moved" and moved.revision_now == f"revid={second}"
    now = r.fetch_visible(url, principal=alice)
    assert now is not None and [now.content[s:e] for s, e in moved.spans_now] == [quote]

    editor.edit(PARENTAL, PARENTAL_TEXT.replace("16 weeks", "18 weeks"))
    changed = check(alice)
    assert changed.outcome == "changed" and changed.nearest == quote.replace("16", "18")
    assert [(s.passage, s.source) for s in changed.substitutions] == [("16", "18")]

    editor.delete(PARENTAL)
    deleted = check(alice)
    assert deleted.outcome == "gone", deleted.reason
    assert deleted.model_dump(exclude={"citation"}) == \
        check(mallory).model_dump(exclude={"citation"})
