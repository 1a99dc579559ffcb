"""What can go wrong with embeddings, in two kinds the pipeline treats differently.

`EmbeddingsUnavailable`: the embeddings cannot be set up (a package or model file missing, a file that
does not match its pinned sha256, a provider misconfigured). EvidenT then answers by words only and says
why. `EmbeddingsFailure`: a call failed while answering (a server down, slow or answering garbage); the
query goes on by words and its status is `degraded`.
"""

from __future__ import annotations

from typing import Literal

FailureKind = Literal["timeout", "unreachable", "http", "reply"]


class EmbeddingsError(Exception):
    """Base of both kinds; `message` is one line for a user, naming what failed and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EmbeddingsUnavailable(EmbeddingsError):
    """The embeddings cannot be used at all: EvidenT works by words only."""


class EmbeddingsFailure(EmbeddingsError):
    """One embeddings call failed (`kind`; `status` for an HTTP error): the query is degraded."""

    def __init__(self, kind: FailureKind, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.status = status
