"""verify_answer: an agent's final answer checked against the passages EvidenT returned in the same thread.

The `verify` node checks EvidenT's own answer; an agent then rewrites it, merges two tool results, or adds a
sentence of its own. This step checks the agent's last word with the same parts (DESIGN §3c):

- **What is read.** The final answer is the last AI message that calls no tool; the evidence is the
  `EvidenceArtifact`s of the tool messages before it in the same thread (evident/agent/thread.py, which also
  says how `[n]` and `[url]` marks resolve when several tool calls returned evidence). Nothing else is read:
  no index, no source, no other thread, so a check never sees a passage the caller's own EvidenT call did not
  return to the caller.
- **Sentences.** The answer is parsed as `verify` parses EvidenT's answers (evident/citations/answer.py): the
  text before a group of marks is one cited sentence, and uncited text is split into its sentences. Uncited
  text that makes no claim (a question, a lead-in ending in ":", fewer than three content words, the
  "documentation does not explicitly state" preface) and lines that list the sources (`[1] url — title`) are
  left as they are.
- **Support.** A citation supports its sentence when one passage of its source does, by the measures `verify`
  uses: the paper's n-gram overlap of the sentence with the passage quote above `threshold` (what EvidenT's
  quoted answers pass), or, unless `paraphrase` is off, the token measure of evident/citations/support.py that
  `verify` applies to model-written sentences (numbers and negation gates, then content-word recall above
  `sentence_threshold`).
- **Contradiction.** The sentence is aligned with each cited passage's quote by `evident.alignment.align`;
  a `corrected` decision (the sentence is the passage except for a changed number, name or negation) makes the
  citation *contradict* it, with the decision's substitutions (the sentence's words and the source's) and the
  source's own words at their exact spans. A sentence too short for n-grams of size `ngram_n` is aligned
  again with n-grams of `fine_n` for this question alone, never for support.
- **Decisions.** A citation that does not support its sentence is removed. A sentence none of its citations
  supports is checked against every passage of the thread (the latest call first) and re-cited to the first
  that supports it, as `verify` repairs a sentence. Its status is then `supported`; else `contradicted`
  when a passage contradicts it (the corrected message shows the source's words with that passage's mark, or
  drops the sentence: `contradicted`); else `unsupported` (removed, or kept with "[unsupported]": `unsupported`).
  An answer left with nothing is the fixed insufficient answer.

Spans are character offsets into the source text the artifact's `content_hash` names, exact to the character:
the part of the passage the sentence matches, mapped through the passage's own spans. Deterministic, local and
framework-free but for reading messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, cast

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import MessagesState
from langgraph.prebuilt import ToolRuntime
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from evident.agent.artifact import EvidencePassage
from evident.agent.thread import (
    Source,
    ThreadEvidence,
    as_messages,
    final_answer,
    split_mark_lists,
    thread_evidence,
)
from evident.alignment import QUOTE_JOINER, AlignmentDecision, IndexCache, Substitution, align
from evident.alignment.lexicon import NEGATIONS, content_tokens
from evident.alignment.sentences import split_sentences
from evident.alignment.tokenize import words
from evident.citations.answer import (
    PREFACE,
    NgramSupport,
    is_table,
    parse_answer,
    render_answer,
    table_rows,
)
from evident.citations.support import GeneratedSentenceSupport
from evident.context import EvidentContext
from evident.models import INSUFFICIENT_ANSWER, Line, Sentence
from evident.request_settings import run_settings

Status = Literal["supported", "unsupported", "contradicted"]
Verdict = Literal["kept", "removed", "added"]
Relation = Literal["supports", "contradicts", "unrelated", "unresolved"]

_NUMBER_MARK = re.compile(r"\[\s*(\d{1,3})\s*\]")
_CLOSING = ".,;:!?)"
_MIN_CLAIM_TOKENS = 3  # uncited text with fewer content words makes no claim ("Sure.", "In short:")


class AnswerCheckSettings(BaseModel):
    """How strictly an answer is checked; `from_context` takes the run's EvidenT settings."""

    ngram_n: int = Field(5, ge=1, description="n of the n-gram measure (EvidentContext.ngram_n)")
    threshold: float = Field(0.7, ge=0.0, le=1.0, description="overlap a sentence needs (EvidentContext.threshold)")
    sentence_threshold: float = Field(0.8, ge=0.0, le=1.0,
                                      description="content-word recall a rewritten sentence needs")
    paraphrase: bool = Field(True, description="accept a model's rewrite of a passage by the token measure")
    fine_n: int = Field(2, ge=1, description="n of the second alignment that finds a short sentence's changed word")
    unsupported: Literal["remove", "flag"] = Field("remove", description="what happens to an unsupported sentence")
    contradicted: Literal["correct", "remove"] = Field(
        "correct", description="'correct': the sentence becomes the source's words with its mark; 'remove': dropped")
    uncited: Literal["check", "keep"] = Field(
        "check", description="'check': an uncited claim must be supported too; 'keep': only cited ones are checked")

    @classmethod
    def from_context(cls, ctx: EvidentContext, **overrides: Any) -> AnswerCheckSettings:
        return cls(ngram_n=ctx.ngram_n, threshold=ctx.threshold, sentence_threshold=ctx.sentence_threshold,
                   unsupported=ctx.unsupported, **overrides)


class CitationCheck(BaseModel):
    """One mark of one sentence, what it resolved to, and what became of it."""

    mark: str = Field(description="the mark without brackets: a source number or a url")
    verdict: Verdict = Field(description="kept in the corrected message, removed from it, or added by the repair")
    relation: Relation = Field(description="what the resolved passage says of the sentence")
    url: str = ""
    title: str = ""
    tool_call_id: str = Field("", description="the EvidenT tool call whose artifact holds the passage")
    passage_id: str = ""
    score: float = Field(0.0, description="the better of the two support measures (0..1)")
    spans: list[tuple[int, int]] = Field(default_factory=list,
                                         description="offsets into the source text (content_hash) the sentence matches")
    quote: str = Field("", description="the source's own words at `spans`")
    content_hash: str = ""
    source_words: list[Substitution] = Field(
        default_factory=list, description="contradicts: where the sentence says other than the source (passage = "
        "the sentence's words, source = the source's words)")


class SentenceCheck(BaseModel):
    """One claim of the answer and its verdict."""

    sentence: str = Field(description="the sentence as the answer wrote it, without its marks")
    status: Status
    citations: list[CitationCheck] = Field(default_factory=list)
    corrected: str | None = Field(description="the sentence as the corrected message shows it; None: removed")
    url: str = Field("", description="the source that decided the status (supported or contradicted)")
    spans: list[tuple[int, int]] = Field(default_factory=list)
    quote: str = Field("", description="the source's own words at `spans`")
    source_words: list[Substitution] = Field(default_factory=list)

    @property
    def kept(self) -> list[str]:
        return [c.mark for c in self.citations if c.verdict != "removed"]

    @property
    def removed(self) -> list[str]:
        return [c.mark for c in self.citations if c.verdict == "removed"]


class AnswerCheck(BaseModel):
    """The check of one final answer: per claim, and the corrected text."""

    answer: str = Field(description="the final answer as the agent wrote it")
    corrected: str = Field(description="the answer with unsupported citations and sentences removed (or flagged)")
    sentences: list[SentenceCheck] = Field(default_factory=list)
    evidence_calls: int = Field(0, description="EvidenT tool results of the thread the answer was checked against")
    notes: list[str] = Field(default_factory=list, description="what could not be read (an invalid artifact)")

    def count(self, status: Status) -> int:
        return sum(1 for s in self.sentences if s.status == status)

    @property
    def changed(self) -> bool:
        return self.corrected != self.answer


# -- one sentence against one passage -------------------------------------------------------------------------


def _material(substitution: Substitution) -> bool:
    """A substitution that changes what is claimed: a number, a name (a capitalised word) or a negation on
    either side. Another changed word ("file" for "submit") is a rewording, left to the support measures."""
    words = f"{substitution.passage} {substitution.source}".split()
    return any(any(ch.isdigit() for ch in w) or w[:1].isupper() or w.strip(".,;:!?").casefold() in NEGATIONS
               or w.casefold().endswith("n't") for w in words)


@dataclass(frozen=True)
class _Finding:
    relation: Relation
    score: float
    passage: EvidencePassage | None = None
    decision: AlignmentDecision | None = None  # the sentence aligned with the passage's quote
    part: str = ""  # contradicts: the table row the decision is about (a table is judged row by row)

    @property
    def rank(self) -> tuple[int, float]:
        return ({"supports": 2, "contradicts": 1}.get(self.relation, 0), self.score)


def _quote_map(passage: EvidencePassage) -> list[tuple[int, int, int]] | None:
    """(quote start, quote end, source start) of each span of the passage: how its quote was laid out
    (evident.alignment.quote_of); None when the quote does not have its spans' length."""
    out: list[tuple[int, int, int]] = []
    pos, prev_end = 0, None
    for start, end in passage.spans:
        if out and start != prev_end:
            pos += len(QUOTE_JOINER)
        out.append((pos, pos + end - start, start))
        pos, prev_end = pos + end - start, end
    return out if out and pos == len(passage.quote) else None


def source_spans(passage: EvidencePassage, quote_spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Offsets into the quote as offsets into the source text; the passage's own spans when they cannot be
    mapped (an artifact whose quote does not match its spans)."""
    layout = _quote_map(passage)
    if layout is None:
        return list(passage.spans)
    out: list[tuple[int, int]] = []
    for a, b in quote_spans:
        for qs, qe, start in layout:
            lo, hi = max(a, qs), min(b, qe)
            if lo >= hi:
                continue
            if out and out[-1][1] == start + lo - qs:  # adjacent spans of the source read as one
                out[-1] = (out[-1][0], start + hi - qs)
            else:
                out.append((start + lo - qs, start + hi - qs))
    return out or list(passage.spans)


class _Judge:
    """Sentences against passages, by the measures of `verify` and the alignment (module docstring)."""

    def __init__(self, settings: AnswerCheckSettings) -> None:
        self.settings = settings
        self.ngram = NgramSupport(settings.ngram_n, settings.threshold)
        self.written = GeneratedSentenceSupport(settings.sentence_threshold) if settings.paraphrase else None
        self.cache = IndexCache(max_chars=4_000_000)
        self._words: dict[str, frozenset[str]] = {}

    def _align(self, sentence: str, passage: EvidencePassage, n: int) -> AlignmentDecision:
        return align([{"passage_id": "answer", "url": passage.url, "content": sentence}],
                     [{"url": passage.url, "content": passage.quote}],
                     n=n, threshold=self.settings.threshold, cache=self.cache)[0]

    def _near_copy(self, sentence: str, passage: EvidencePassage) -> bool:
        """Whether the sentence could be part of the passage with a few words changed: at least half of its
        words are the passage's. Only such a sentence can align as `corrected`; the others skip the alignment."""
        mine = words(sentence)
        theirs = self._words.get(passage.quote)
        if theirs is None:
            theirs = self._words[passage.quote] = frozenset(words(passage.quote))
        return bool(mine) and sum(1 for w in mine if w in theirs) * 2 >= len(mine)

    def contradiction(self, sentence: str, passage: EvidencePassage) -> tuple[str, AlignmentDecision] | None:
        """The alignment that shows the sentence (or one row of a table) is the passage with a number, name or
        negation changed, and that row."""
        for part in table_rows(sentence) if is_table(sentence) else [sentence]:
            if not self._near_copy(part, passage):
                continue
            for n in dict.fromkeys((self.settings.ngram_n, min(self.settings.fine_n, self.settings.ngram_n))):
                aligned = self._align(part, passage, n)
                if aligned.action == "corrected" and any(_material(s) for s in aligned.substitutions):
                    return part, aligned
        return None

    def passage(self, sentence: str, passage: EvidencePassage) -> _Finding:
        if not passage.quote:
            return _Finding("unrelated", 0.0, passage)
        contradicted = self.contradiction(sentence, passage)
        if contradicted is not None:
            part, aligned = contradicted
            return _Finding("contradicts", aligned.final_overlap, passage, aligned, part if part != sentence else "")
        as_decision = AlignmentDecision(passage_id=passage.passage_id, action="kept", url=passage.url,
                                        original_url=passage.url, overlap=1.0, spans=passage.spans,
                                        quote=passage.quote)
        scores = [self.ngram.score(sentence, as_decision)]
        if self.written is not None:
            scores.append(self.written.score(sentence, as_decision))
        if not (self.ngram.passes(scores[0]) or self.written is not None and self.written.passes(scores[-1])):
            return _Finding("unrelated", max(scores), passage)
        aligned = self._align(sentence, passage, self.settings.ngram_n)  # cached: where the sentence lies
        return _Finding("supports", max(scores), passage, aligned if aligned.spans else None)

    def source(self, sentence: str, source: Source) -> _Finding:
        """The best finding among the source's passages: one that supports, else one that contradicts."""
        found = [self.passage(sentence, p) for p in source.passages]
        return max(found, key=lambda f: f.rank, default=_Finding("unrelated", 0.0))


def _citation(mark: str, verdict: Verdict, source: Source | None, found: _Finding) -> CitationCheck:
    p, d = found.passage, found.decision
    if source is None or p is None:
        return CitationCheck(mark=mark, verdict=verdict, relation=found.relation if source else "unresolved")
    spans = source_spans(p, d.spans) if d is not None else list(p.spans)
    quote = d.quote if d is not None else p.quote
    return CitationCheck(
        mark=mark, verdict=verdict, relation=found.relation, url=source.url, title=source.title,
        tool_call_id=source.tool_call_id, passage_id=p.passage_id, score=round(found.score, 6),
        spans=spans, quote=quote, content_hash=p.content_hash,
        source_words=d.substitutions if d is not None and found.relation == "contradicts" else [],
    )


# -- the answer ------------------------------------------------------------------------------------------------


def _is_claim(text: str) -> bool:
    stripped = text.strip()
    return not (not stripped or stripped.endswith(("?", ":")) or stripped.startswith(PREFACE)
                or stripped == INSUFFICIENT_ANSWER or len(content_tokens(stripped)) < _MIN_CLAIM_TOKENS)


def _is_source_line(line: Line, evidence: ThreadEvidence) -> bool:
    """A line of the answer's source list: marks first, then only the url or title of what they name."""
    first, rest = line.sentences[0], line.sentences[1:]
    if first.text or not first.urls:
        return False
    named = [s for mark in first.urls for s in evidence.sources_for(mark)]
    tail = " ".join(u.text for u in rest).strip(" -—–:|").strip()
    return bool(named) and (not tail or any(tail in (s.url, s.title) or s.url in tail or (s.title and s.title in tail)
                                            for s in named))


def _sentences_of(line: Line) -> None:
    """Split each uncited unit of `line` into its sentences, in place (each is its own claim)."""
    units: list[Sentence] = []
    for u in line.sentences:
        if u.urls or not u.text:
            units.append(u)
            continue
        units.extend(Sentence(text=u.text[a:b]) for a, b in split_sentences(u.text, inside_items=True))
    line.sentences = units


def _attach_punctuation(line: Line) -> None:
    """"text [1]. More" is read as "text. [1] More": punctuation right after a group of marks ends the cited
    sentence before it."""
    for before, after in zip(line.sentences, line.sentences[1:], strict=False):
        stripped = after.text.lstrip()
        end = len(stripped) - len(stripped.lstrip(_CLOSING))
        if before.urls and end:
            before.text += stripped[:end].strip()
            after.text = stripped[end:].strip()
    line.sentences = [u for u in line.sentences if u.text or u.urls]


def _marks_known(text: str, evidence: ThreadEvidence) -> frozenset[str]:
    """The thread's marks, and every bracketed number of the answer: "[7]" is a mark even when no call
    gave a source 7 (then it resolves to nothing and is removed)."""
    return evidence.marks() | {m.group(1) for m in _NUMBER_MARK.finditer(text)}


def check_answer_text(answer: str, evidence: ThreadEvidence,
                      settings: AnswerCheckSettings | None = None) -> AnswerCheck:
    """Check `answer` against `evidence` (module docstring); the answer's layout is kept."""
    settings = settings or AnswerCheckSettings()
    judge = _Judge(settings)
    text = split_mark_lists(answer, evidence.marks())
    lines = parse_answer(text, _marks_known(text, evidence))
    checks: list[SentenceCheck] = []
    for line in lines:
        if not line.sentences or _is_source_line(line, evidence):
            continue
        _attach_punctuation(line)
        _sentences_of(line)
        kept: list[Sentence] = []
        for unit in line.sentences:
            if not unit.urls and (settings.uncited == "keep" or not _is_claim(unit.text)):
                kept.append(unit)
                continue
            check = _check_unit(unit, evidence, judge, settings)
            checks.append(check)
            if check.corrected is not None:
                kept.append(unit)
        line.sentences = kept
    corrected = render_answer([ln for ln in lines if ln.sentences or not ln.prefix]).strip()
    return AnswerCheck(answer=answer, corrected=corrected or INSUFFICIENT_ANSWER, sentences=checks,
                       evidence_calls=len(evidence.artifacts), notes=list(evidence.notes))


def _check_unit(unit: Sentence, evidence: ThreadEvidence, judge: _Judge,
                settings: AnswerCheckSettings) -> SentenceCheck:
    """Judge one claim; `unit` is changed in place to what the corrected message shows."""
    sentence = unit.text
    cited: list[tuple[str, Source | None, _Finding]] = []
    for mark in dict.fromkeys(unit.urls):
        candidates = evidence.sources_for(mark)
        findings = [(s, judge.source(sentence, s)) for s in candidates]
        # The first candidate (latest call first) that supports; else one that contradicts; else the latest.
        best = max(findings, key=lambda sf: sf[1].rank[0], default=None)
        cited.append((mark, *best) if best is not None else (mark, None, _Finding("unresolved", 0.0)))
    supporting = [c for c in cited if c[2].relation == "supports"]
    contradicting = [c for c in cited if c[2].relation == "contradicts"]
    added: tuple[str, Source, _Finding] | None = None
    if not supporting and not contradicting:
        tried = {(s.call, s.url) for _, s, _ in cited if s is not None}
        for source in evidence.all_sources:
            if (source.call, source.url) in tried:
                continue
            found = judge.source(sentence, source)
            if found.relation == "supports" or (found.relation == "contradicts" and added is None):
                added = (source.mark, source, found)
                if found.relation == "supports":
                    break
    if supporting or (added is not None and added[2].relation == "supports"):
        status: Status = "supported"
        deciding = supporting[0] if supporting else added
    elif contradicting or added is not None:
        status = "contradicted"
        deciding = contradicting[0] if contradicting else added
    else:
        status, deciding = "unsupported", None

    keep = {c[0] for c in supporting} if status == "supported" else set()
    if status == "contradicted" and settings.contradicted == "correct" and deciding in cited:
        keep = {deciding[0]}
    citations = [_citation(mark, "kept" if mark in keep else "removed", source, found)
                 for mark, source, found in cited]
    if added is not None and (status == "supported" or settings.contradicted == "correct"):
        citations.append(_citation(added[0], "added", added[1], added[2]))
    check = _sentence_check(sentence, status, citations, deciding)

    if status == "supported":
        unit.urls = [c.mark for c in citations if c.verdict != "removed"]
    elif status == "contradicted" and settings.contradicted == "correct" and check.quote:
        assert deciding is not None  # a contradicted sentence has the passage that contradicts it
        unit.text = _in_source_words(sentence, deciding[2], check)
        unit.urls = [c.mark for c in citations if c.verdict != "removed"]
    elif status == "unsupported" and settings.unsupported == "flag":
        unit.urls, unit.flagged = [], True
    else:
        return check.model_copy(update={"corrected": None})
    corrected = Sentence(text=unit.text, urls=list(unit.urls), flagged=unit.flagged)
    return check.model_copy(update={"corrected": render_answer([Line(sentences=[corrected])])})


def _in_source_words(sentence: str, found: _Finding, check: SentenceCheck) -> str:
    """The contradicted sentence as the corrected message shows it: the source's words. A table keeps its
    layout: the row that contradicts has each changed word replaced by the source's (the row's quote, between
    bars, when a change cannot be placed: a word the row left out)."""
    if not found.part:
        return check.quote
    row = found.part
    for sub in check.source_words:
        at = row.find(sub.passage) if sub.passage else -1
        if at < 0:
            row = check.quote if check.quote.startswith("|") else f"| {check.quote} |"
            break
        row = row[:at] + sub.source + row[at + len(sub.passage):]
    return sentence.replace(found.part, row, 1)


def _sentence_check(sentence: str, status: Status, citations: list[CitationCheck],
                    deciding: tuple[str, Source | None, _Finding] | None) -> SentenceCheck:
    decided = next((c for c in citations if deciding is not None and c.mark == deciding[0]
                    and c.relation == deciding[2].relation), None)
    return SentenceCheck(
        sentence=sentence, status=status, citations=citations, corrected=sentence,
        url=decided.url if decided else "", spans=decided.spans if decided else [],
        quote=decided.quote if decided else "", source_words=decided.source_words if decided else [],
    )


# -- the function, the node, the tool ------------------------------------------------------------------------


def verify_answer(messages: Sequence[BaseMessage | Mapping[str, Any]],
                  settings: AnswerCheckSettings | None = None) -> AnswerCheck | None:
    """Check the thread's final answer (the last AI message that calls no tool) against the EvidenT evidence
    of the tool messages before it; None when the thread has no final answer."""
    thread = as_messages(messages)
    at = final_answer(thread)
    if at is None:
        return None
    return check_answer_text(thread[at].text, thread_evidence(thread, before=at), settings)


def corrected_message(message: AIMessage, check: AnswerCheck) -> AIMessage:
    """The final answer as checked: the same id (so `add_messages` replaces it in the thread), the corrected
    text, and the counts of the check in `response_metadata["evident_check"]`."""
    summary = {"supported": check.count("supported"), "unsupported": check.count("unsupported"),
               "contradicted": check.count("contradicted"), "changed": check.changed}
    return message.model_copy(update={
        "content": check.corrected,
        "response_metadata": {**message.response_metadata, "evident_check": summary},
    })


def settings_of(runtime: Runtime[Any] | ToolRuntime[Any, Any] | None) -> AnswerCheckSettings:
    """The check's settings from the run's EvidenT settings (`context`, `evident.toml`, the environment);
    a graph whose context is not EvidenT's gets the `evident.toml` and environment defaults."""
    ctx = getattr(runtime, "context", None)
    usable = ctx is None or isinstance(ctx, (EvidentContext, Mapping))
    # A tool's runtime carries the run's `context` and `server_info` as a node's does: all run_settings reads.
    return AnswerCheckSettings.from_context(run_settings(cast("Runtime[EvidentContext]", runtime) if usable else None))


class VerifyAnswerState(MessagesState):
    """`MessagesState` with the check of the last answer (`AnswerCheck` as JSON), as `verify_answer_node` writes it."""

    answer_check: NotRequired[dict[str, Any] | None]


def verify_answer_node(state: MessagesState, runtime: Runtime[Any]) -> dict[str, Any]:
    """A graph node for any state with `messages` (MessagesState): replaces the final answer with its checked
    form and writes the check (JSON) to `answer_check` (a state without that key just drops it)."""
    thread = as_messages(state.get("messages") or [])
    at = final_answer(thread)
    if at is None:
        return {"answer_check": None}
    message = thread[at]
    assert isinstance(message, AIMessage)  # final_answer finds AI messages only
    check = check_answer_text(message.text, thread_evidence(thread, before=at), settings_of(runtime))
    return {"messages": [corrected_message(message, check)], "answer_check": check.model_dump(mode="json")}


@tool("verify_answer", response_format="content_and_artifact")
def verify_answer_tool(answer: str, runtime: ToolRuntime[Any, Any]) -> tuple[str, dict[str, Any]]:
    """Check a draft answer against the EvidenT results of this conversation before giving it. Returns the
    draft with every citation the sources do not support removed, unsupported sentences removed, and
    sentences that misstate a number, name or negation rewritten in the source's words."""
    # The thread and the settings come from the run (LangGraph injects `runtime`), never from the model.
    state = runtime.state
    messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
    check = check_answer_text(answer, thread_evidence(as_messages(messages or [])), settings_of(runtime))
    summary = (f"{check.count('supported')} supported, {check.count('contradicted')} contradicted, "
               f"{check.count('unsupported')} unsupported sentence(s).")
    return f"{check.corrected}\n\n({summary})", check.model_dump(mode="json")


__all__ = [
    "AnswerCheck", "AnswerCheckSettings", "CitationCheck", "SentenceCheck", "VerifyAnswerState", "check_answer_text",
    "corrected_message", "source_spans", "verify_answer", "verify_answer_node", "verify_answer_tool",
]
