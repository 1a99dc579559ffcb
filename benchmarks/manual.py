"""A real manual nobody on the project wrote or tuned on: git's HTML documentation (Debian's `git-doc`),
30 questions its users ask and 6 it cannot answer (issue 48, item 5); with `--set postgresql`, a second
one: PostgreSQL 15's (Debian's `postgresql-doc-15`), 17 questions and 4 it cannot answer
(`manual_questions_postgresql.jsonl`), to check that a change holds beyond the manual it was made on.

    python benchmarks/manual.py [--set git|postgresql] [--words] [--pages N] [--json] [--check] [--cache DIR]

Each answerable question in `benchmarks/manual_questions.jsonl` names the fact its answer must state
(`fact`: regular expressions that must all match the answer's text, case-insensitive, whitespace
joined) and the page that states it (`page`: a path relative to the manual, or a list of them when
the manual states the fact on several pages, e.g. git-config.html repeats each command's
configuration section); each unanswerable one (`answerable: false`) lists in `absent` what a
statement of its answer would look like, which must match no page of the manual.

The script installs `git-doc` when the manual is missing (apt-get, as root; otherwise it says what
to run), then checks the questions against the manual's text as the index reads it: every fact on
every page named for it, every `absent` pattern on no page (`--check` stops there), so the
benchmark cannot rot when the manual changes. It copies the manual's HTML pages (not the plain-text
sources Debian ships beside them) into `--cache` (default `.evident/manual/`), indexes them with
`evident index` (reused and refreshed on the next run; `--words` indexes and asks by words only,
`EVIDENT_EMBEDDINGS=none`; `--pages N` keeps the question pages and the first others by name, N in
all), asks every question with `evident ask --batch --json` in the offline mode (the environment's
`EVIDENT_*` settings are left out, so a configured model or `evident.toml` does not change the
measurement), and prints per question and in total (each answer's whole `--json` result is kept
beside the index, in `<index>.answers.jsonl`):

- answerable: states the fact with a right page cited first / states the fact, another page first /
  states something else (misleading: the fact is not in the answer, which is neither refused nor
  hedged) / hedged (`evidence` "weak": it opens with "The documentation does not explicitly state") / refused
  (status `insufficient`);
- unanswerable: refused / hedged (both right) / answered (misleading).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from machine_info import describe  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PACKAGE = "git-doc"
MANUAL = Path("/usr/share/doc/git-doc")
QUESTIONS = Path(__file__).resolve().parent / "manual_questions.jsonl"
DEFAULT_CACHE = ROOT / ".evident" / "manual"
# `--set`: the manuals with questions here, each its Debian package, where the package puts the HTML pages,
# its questions and its default cache. git's is the development manual (issue 48); PostgreSQL's is a second
# one, to check that a change to the offline engine holds beyond the manual it was made on.
MANUALS: dict[str, tuple[str, Path, Path, Path]] = {
    "git": (PACKAGE, MANUAL, QUESTIONS, DEFAULT_CACHE),
    "postgresql": ("postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html"),
                   Path(__file__).resolve().parent / "manual_questions_postgresql.jsonl",
                   ROOT / ".evident" / "manual-postgresql"),
}

RIGHT = "fact, right page first"
OTHER_PAGE = "fact, another page first"
MISLEADING = "something else"
ANSWERED = "answered"  # an unanswerable question answered: misleading too
HEDGED = "hedged"
REFUSED = "refused"
ERROR = "error"
ANSWERABLE_OUTCOMES = (RIGHT, OTHER_PAGE, MISLEADING, HEDGED, REFUSED, ERROR)
UNANSWERABLE_OUTCOMES = (REFUSED, HEDGED, ANSWERED, ERROR)

_WS = re.compile(r"\s+")
_CITATION = re.compile(r"\[(?:file|https?)://[^\]\s]*\]")


class QuestionError(ValueError):
    """The question file is malformed or no longer agrees with the manual."""


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    """The questions of `path`, each checked for the fields its kind needs; `page` always a list."""
    questions: list[dict[str, Any]] = []
    seen: set[str] = set()
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        q = json.loads(line)
        where = f"{path.name}:{no}"
        if not isinstance(q.get("id"), str) or q["id"] in seen:
            raise QuestionError(f"{where}: missing or repeated id")
        if not isinstance(q.get("question"), str) or not isinstance(q.get("answerable"), bool):
            raise QuestionError(f"{where}: needs a string question and a boolean answerable")
        seen.add(q["id"])
        if q["answerable"]:
            pages = [q["page"]] if isinstance(q.get("page"), str) else q.get("page")
            if not pages or not all(isinstance(p, str) and p for p in pages) or not q.get("fact"):
                raise QuestionError(f"{where}: an answerable question needs a fact and its page")
            q["page"] = pages
        elif not q.get("absent"):
            raise QuestionError(f"{where}: an unanswerable question lists what must be absent from the manual")
        for pattern in q.get("fact", []) + q.get("absent", []):
            re.compile(pattern)
        questions.append(q)
    return questions


def flat(text: str) -> str:
    return _WS.sub(" ", text).strip()


def matches(patterns: Iterable[str], text: str) -> list[str]:
    """The patterns of `patterns` found in `text` (case-insensitive, whitespace joined)."""
    return [p for p in patterns if re.search(p, flat(text), re.IGNORECASE)]


def page_text(path: Path) -> str:
    """The page's text as `evident index` reads it (the spans of every citation are offsets into it)."""
    from evident.connectors.index.formats import load_html
    from evident.context import EvidentContext

    problems: list[str] = []
    doc = load_html(path, path.read_bytes(), path.name, lambda _p, why: problems.append(why),
                    EvidentContext().fallback_encoding)
    if doc is None:
        raise QuestionError(f"{path}: not readable as a page: {'; '.join(problems)}")
    return doc.content


def check_questions(questions: list[dict[str, Any]], manual: Path) -> list[str]:
    """Every way the questions disagree with the manual: a fact missing from a page named for it, a
    named page missing, or an unanswerable question's `absent` pattern found on some page."""
    problems: list[str] = []
    texts: dict[str, str] = {}
    for path in sorted(manual.rglob("*.html")):
        texts[path.relative_to(manual).as_posix()] = page_text(path)
    for q in questions:
        if q["answerable"]:
            for page in q["page"]:
                if page not in texts:
                    problems.append(f"{q['id']}: no page {page} in the manual")
                    continue
                missing = [f for f in q["fact"] if f not in matches([f], texts[page])]
                if missing:
                    problems.append(f"{q['id']}: {page} does not state {missing}")
        else:
            for page, text in texts.items():
                found = matches(q["absent"], text)
                if found:
                    problems.append(f"{q['id']}: {page} matches {found}: the manual may answer it")
    return problems


def answer_text(res: dict[str, Any]) -> str:
    """The answer's words without its `[url]` citation marks (a page's name is not a statement)."""
    return flat(_CITATION.sub(" ", str(res.get("answer") or "")))


def cited_page(url: str, corpus: Path) -> str:
    """The page a citation's url names, relative to the corpus folder (its path's tail for a web url)."""
    parts = urlsplit(url)
    path = Path(unquote(parts.path))
    if parts.scheme == "file":
        try:
            return path.relative_to(corpus.resolve()).as_posix()
        except ValueError:
            return path.as_posix()
    return path.name


def is_hedged(res: dict[str, Any]) -> bool:
    """The answer says the documentation does not state it explicitly: its `evidence` is `weak`."""
    return res.get("evidence") == "weak"


def judge(q: dict[str, Any], res: dict[str, Any], corpus: Path) -> str:
    """One of ANSWERABLE_OUTCOMES (UNANSWERABLE_OUTCOMES for a question the manual cannot answer)."""
    status = res.get("status")
    if status == "error":
        return ERROR
    if status == "insufficient":
        return REFUSED
    if is_hedged(res):
        return HEDGED
    if not q["answerable"]:
        return ANSWERED
    if len(matches(q["fact"], answer_text(res))) < len(q["fact"]):
        return MISLEADING
    citations = res.get("citations") or []
    first = cited_page(citations[0]["url"], corpus) if citations else ""
    return RIGHT if first in q["page"] else OTHER_PAGE


def ensure_manual(manual: Path, package: str = PACKAGE) -> None:
    """Install the manual's Debian package when it is missing, or exit saying how to."""
    if (manual / "index.html").is_file():
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        sys.exit(f"manual.py: the manual is not in {manual}: install Debian's {package} package "
                 f"(as root: apt-get install {package}), or point --manual at it")
    print(f"installing {package} with apt-get ...", file=sys.stderr)
    install = ["apt-get", "install", "-y", "--no-install-recommends", package]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=False)
        if subprocess.run(install, env=env, check=False).returncode != 0:
            sys.exit(f"manual.py: apt-get could not install {package}")
    if not (manual / "index.html").is_file():
        sys.exit(f"manual.py: {package} is installed but {manual}/index.html is not there: "
                 "dpkg may exclude /usr/share/doc (see /etc/dpkg/dpkg.cfg.d/)")


def manual_version(package: str = PACKAGE) -> str:
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                          check=False)
    return f"{package} {proc.stdout.strip()}" if proc.returncode == 0 else package


def choose_pages(manual: Path, questions: list[dict[str, Any]], limit: int | None) -> list[str]:
    """The manual's HTML pages; with `limit`, the pages the questions name and the first others by name."""
    pages = sorted(p.relative_to(manual).as_posix() for p in manual.rglob("*.html"))
    if limit is None:
        return pages
    named = {p for q in questions if q["answerable"] for p in q["page"]}
    others = [p for p in pages if p not in named]
    return sorted(named | set(others[: max(0, limit - len(named))]))


def sync_corpus(manual: Path, pages: list[str], corpus: Path) -> None:
    """`corpus` holds exactly `pages`, copied with their times, so an unchanged page is not re-read."""
    wanted = set(pages)
    for old in corpus.rglob("*.html") if corpus.exists() else ():
        if old.relative_to(corpus).as_posix() not in wanted:
            old.unlink()
    for page in pages:
        src, dst = manual / page, corpus / page
        if dst.is_file() and dst.stat().st_size == src.stat().st_size and dst.stat().st_mtime == src.stat().st_mtime:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def cli_env(words_only: bool) -> dict[str, str]:
    """The environment without `EVIDENT_*` settings (offline mode, default settings), this checkout's
    code first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVIDENT_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    if words_only:
        env["EVIDENT_EMBEDDINGS"] = "none"
    return env


def evident(args: list[str], env: dict[str, str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evident.cli", *args], env=env, cwd=cwd, text=True,
                          check=False, **kw)


def index(corpus: Path, index_file: Path, env: dict[str, str]) -> tuple[float, str]:
    """(seconds, the CLI's summary) of building or refreshing the index."""
    start = time.perf_counter()
    proc = evident(["index", str(corpus), "--index", str(index_file)], env, corpus.parent, capture_output=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"manual.py: evident index failed:\n{proc.stdout}{proc.stderr}")
    return seconds, flat(proc.stdout + " " + proc.stderr)


def ask(questions: list[dict[str, Any]], corpus: Path, index_file: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """Each question's `evident ask --json` result, in order; all of them are kept beside the index
    (`<index>.answers.jsonl`: citations, spans and passages, for reading a wrong answer)."""
    batch = corpus.parent / "questions.jsonl"
    batch.write_text("".join(json.dumps({"id": q["id"], "query": q["question"]}) + "\n" for q in questions),
                     encoding="utf-8")
    proc = evident(["ask", "--corpus", str(corpus), "--index", str(index_file), "--batch", str(batch), "--json"],
                   env, corpus.parent, stdout=subprocess.PIPE)
    index_file.with_suffix(".answers.jsonl").write_text(proc.stdout, encoding="utf-8")
    results = {r.get("id"): r for r in (json.loads(line) for line in proc.stdout.splitlines() if line.strip())}
    missing = [q["id"] for q in questions if q["id"] not in results]
    if missing:
        sys.exit(f"manual.py: evident ask gave no result for {missing} (exit {proc.returncode})")
    return [results[q["id"]] for q in questions]


def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for kind, outcomes in (("answerable", ANSWERABLE_OUTCOMES), ("unanswerable", UNANSWERABLE_OUTCOMES)):
        counts = Counter(r["outcome"] for r in rows if r["answerable"] == (kind == "answerable"))
        out[kind] = {o: counts[o] for o in outcomes}
    return out


def report(rows: list[dict[str, Any]], head: list[str]) -> str:
    lines = [*head, ""]
    for r in rows:
        lines.append(f"{r['id']:<24} {r['outcome']:<26} first cited: {r['first_page'] or '-'}")
        if r["outcome"] not in (RIGHT, REFUSED) and (r["answerable"] or r["outcome"] != HEDGED):
            lines.append(f"{'':<24} {r['answer'][:240]}")
    for kind, counts in totals(rows).items():
        n = sum(counts.values())
        lines.append("")
        lines.append(f"{kind} ({n}):")
        lines.extend(f"  {o:<28} {c:>3} / {n}" for o, c in counts.items())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--set", choices=sorted(MANUALS), default="git",
                    help="which manual and its questions (default git; postgresql: a second manual)")
    ap.add_argument("--manual", type=Path, default=None, help=f"the installed manual (default {MANUAL})")
    ap.add_argument("--questions", type=Path, default=None)
    ap.add_argument("--cache", type=Path, default=None, help="the corpus copy and its index, kept")
    ap.add_argument("--words", action="store_true", help="index and ask by words only (no embeddings)")
    ap.add_argument("--pages", type=int, default=None, help="index the question pages and others, N in all")
    ap.add_argument("--check", action="store_true", help="only check the questions against the manual")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    args = ap.parse_args(argv)
    package, manual, questions_file, cache = MANUALS[args.set]
    args.manual = args.manual or manual
    args.cache = args.cache or cache

    questions = load_questions(args.questions or questions_file)
    ensure_manual(args.manual, package)
    problems = check_questions(questions, args.manual)
    if problems:
        print("the questions no longer agree with the manual:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(questions)} questions agree with {args.manual}")
        return 0

    pages = choose_pages(args.manual, questions, args.pages)
    name = "corpus" if args.pages is None else f"corpus-{args.pages}"
    corpus = (args.cache / name).resolve()
    sync_corpus(args.manual, pages, corpus)
    index_file = corpus.parent / f"{name}{'-words' if args.words else ''}.sqlite3"
    env = cli_env(args.words)
    print(f"indexing {len(pages)} pages into {index_file} ...", file=sys.stderr)
    index_seconds, index_summary = index(corpus, index_file, env)
    print(f"indexed in {index_seconds:.1f} s: {index_summary}", file=sys.stderr)
    start = time.perf_counter()
    results = ask(questions, corpus, index_file, env)
    ask_seconds = time.perf_counter() - start

    rows = []
    for q, res in zip(questions, results, strict=True):
        citations = res.get("citations") or []
        rows.append({"id": q["id"], "question": q["question"], "answerable": q["answerable"],
                     "outcome": judge(q, res, corpus), "status": res.get("status"),
                     "first_page": cited_page(citations[0]["url"], corpus) if citations else "",
                     "pages": q.get("page", []), "fact": q.get("fact", []), "answer": answer_text(res),
                     "generated_by": res.get("generated_by", "")})
    machine = describe()
    mode = "words only" if args.words else "words and meaning (embeddings when installed)"
    if args.json:
        print(json.dumps({"manual": manual_version(package), "pages": len(pages), "mode": mode, "machine": machine,
                          "index_seconds": round(index_seconds, 1), "index": index_summary,
                          "ask_seconds": round(ask_seconds, 1), "totals": totals(rows), "questions": rows},
                         indent=1))
    else:
        head = [f"{manual_version(package)}, {len(pages)} pages, {mode}", machine,
                f"indexing: {index_seconds:.1f} s ({index_summary}); asking {len(rows)} questions: {ask_seconds:.1f} s"]
        print(report(rows, head))
    return 0


if __name__ == "__main__":
    sys.exit(main())
