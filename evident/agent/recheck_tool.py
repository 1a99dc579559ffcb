"""Re-verification as a tool an agent calls: `evident_recheck_tool(...)`.

The model fills no argument. The tool reads the artifacts of the EvidenT tool's earlier messages in the
agent's own state (`InjectedState("messages")`: the thread's `ToolMessage`s, as the checkpoint keeps them),
re-checks every citation against its source as the caller may see it now (evident/agent/recheck.py) and
answers with one line per stale citation; its artifact holds every `AnswerCheck` as JSON.

Who is asking comes from the run, as for the EvidenT tool: the authenticated user of a served run
(`configurable["langgraph_auth_user"]`), else the principal bound when the tool was built, else anonymous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, cast

from langchain_core.callbacks import CallbackManagerForToolRun
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import InjectedState
from pydantic import BaseModel, Field

from evident.agent.artifact import ARTIFACT_KIND
from evident.agent.recheck import AnswerCheck, recheck_answer
from evident.connectors.acl import coerce_principal
from evident.context import EvidentContext
from evident.models import Principal
from evident.nodes.common import authenticated_principal

DEFAULT_NAME = "evident_recheck"
DEFAULT_DESCRIPTION = (
    "Check again whether the quotes behind the earlier organisation-document answers of this conversation "
    "still stand in their sources. Reports, per cited quote, whether it is unchanged, moved, changed (with "
    "what the source says now) or gone. Takes no argument."
)
MAX_ANSWERS = 20  # the most recent EvidenT answers a call re-checks: bounded work per call


class RecheckInput(BaseModel):
    """Nothing the model fills: the thread's messages are injected by the agent's tool node."""

    messages: Annotated[list[Any], InjectedState("messages")] = Field(default_factory=list)


def evidence_of(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The EvidenT artifacts of `messages` (message objects or their JSON), oldest first."""
    found = []
    for message in messages:
        artifact = message.get("artifact") if isinstance(message, Mapping) else getattr(message, "artifact", None)
        if isinstance(artifact, Mapping) and artifact.get("kind") == ARTIFACT_KIND:
            found.append(dict(artifact))
    return found


def _summary(results: list[AnswerCheck]) -> str:
    if not results:
        return "There is no earlier EvidenT answer in this conversation to check."
    lines = []
    for number, result in enumerate(results, 1):
        counts = ", ".join(f"{n} {outcome}" for outcome, n in result.counts.items()) or "no citations"
        lines.append(f"Answer {number} ({result.query}): {counts}.")
        for check in result.checks:
            if check.outcome == "changed":
                now = f' The source now says: "{check.nearest}"' if check.nearest else " Nothing of it remains."
                lines.append(f'- "{check.quote}" ({check.url}) changed.{now}')
            elif check.outcome in ("gone", "unchecked"):
                lines.append(f'- "{check.quote}" ({check.url}) could not be confirmed: {check.outcome}.')
    return "\n".join(lines)


class EvidentRecheckTool(BaseTool):
    """Re-verification as a tool: see `evident_recheck_tool`."""

    name: str = DEFAULT_NAME
    description: str = DEFAULT_DESCRIPTION
    args_schema: type[BaseModel] = RecheckInput
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    context: EvidentContext | None = Field(None, exclude=True)
    principal: Principal | None = Field(None, exclude=True)
    retriever: BaseRetriever | None = Field(None, exclude=True)

    def _caller(self, config: RunnableConfig | None) -> Principal | None:
        configurable = (config or {}).get("configurable") or {}
        if configurable.get("langgraph_auth_user") is not None:
            # A served run: the server's authenticated user (no Runtime here; the config holds the user).
            return authenticated_principal(cast(Any, None), config)
        return self.principal

    def _run(self, messages: list[Any], config: RunnableConfig,
             run_manager: CallbackManagerForToolRun | None = None) -> tuple[str, dict[str, Any]]:
        who = self._caller(config)
        results = [recheck_answer(artifact, context=self.context, principal=who, retriever=self.retriever)
                   for artifact in evidence_of(messages)[-MAX_ANSWERS:]]
        return _summary(results), {"answers": [r.model_dump(mode="json") for r in results]}


def evident_recheck_tool(*, context: EvidentContext | None = None,
                         principal: Principal | Mapping[str, Any] | None = None,
                         retriever: BaseRetriever | None = None, name: str = DEFAULT_NAME,
                         description: str = DEFAULT_DESCRIPTION) -> BaseTool:
    """The re-verification tool for an agent that also has the EvidenT tool (`evident_tool`).

    `context`: the settings whose sources are read (by default `evident.toml` and the environment);
    `retriever`: read these sources instead. `principal`: the caller of a run that is not served.
    The tool returns `(content, {"answers": [AnswerCheck JSON, …]})`, the most recent MAX_ANSWERS answers.
    """
    return EvidentRecheckTool(name=name, description=description, context=context, retriever=retriever,
                              principal=coerce_principal(dict(principal) if isinstance(principal, Mapping)
                                                         else principal))
