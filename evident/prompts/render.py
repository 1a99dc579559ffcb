"""How documents and verified passages are laid out inside a prompt.

Plain labelled blocks rather than JSON: inside a JSON string, line breaks and quotes would appear
escaped, and a model asked to copy text verbatim would copy the escapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from evident.alignment.models import AlignmentDecision, SourceDocument
from evident.alignment.outline import show_path


def source_type_of(doc: SourceDocument) -> str:
    return doc.source_type or str(doc.metadata.get("source_type") or "") or doc.source or "unknown"


def render_document(doc: SourceDocument) -> str:
    """One retrieved document (or part of one) with its URL and source type, for extraction; a part of a
    long document (`evident.llm.batching.split_document`) with the headings its text starts under."""
    path = doc.metadata.get("heading_path")
    section = f"section: {show_path(path)}\n" if isinstance(path, list) and len(path) > 1 else ""
    return (
        "<document>\n"
        f"url: {doc.url}\n"
        f"source_type: {source_type_of(doc)}\n"
        f"title: {doc.title}\n"
        f"{section}"
        "content:\n"
        f"{doc.content}\n"
        "</document>"
    )


def render_documents(docs: Sequence[SourceDocument]) -> str:
    return "\n\n".join(render_document(d) for d in docs) if docs else "(no documents)"


def render_numbered_documents(docs: Sequence[SourceDocument]) -> str:
    """Documents for the baselines, which cite by reference number and list URLs at the end."""
    return "\n\n".join(f"[{i}]\n{render_document(d)}" for i, d in enumerate(docs, 1)) if docs else "(no documents)"


def render_passages(passages: Sequence[AlignmentDecision], documents: Sequence[SourceDocument]) -> str:
    """Verified passages for answer generation: the source's own text (the quote), with its URL,
    title, source type and heading path under the field names the generation prompt refers to."""
    by_url = {d.url: d for d in documents}
    blocks: list[str] = []
    for p in passages:
        doc = by_url.get(p.url)
        title = doc.title if doc else ""
        kind = source_type_of(doc) if doc else "unknown"
        blocks.append(
            "<passage>\n"
            f"documentUrl: {p.url}\n"
            f'documentMetadata: title="{title}"; source_type="{kind}"\n'
            f"headingPath: {show_path(p.heading_path) if p.heading_path else title}\n"
            "documentContent:\n"
            f"{p.quote or p.content}\n"
            "</passage>"
        )
    return "\n\n".join(blocks) if blocks else "(no passages)"
