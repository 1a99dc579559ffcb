"""A conversation's checkpoints under LangGraph's strict msgpack mode (`LANGGRAPH_STRICT_MSGPACK=true`).

LangGraph warns today that it "will block in a future version" the types of a checkpoint that no
allowlist names, and strict mode blocks them now: a blocked value comes back as a plain dict. The
graph's state holds JSON (a model as its `model_dump(mode="json")`, a message as its JSON dict), so a
checkpoint names no class at all: this test runs a follow-up in strict mode (read when LangGraph is
imported, hence a process of its own), requires nothing blocked, and reads the checkpointed values back
with the models (`Model.model_validate`), as any reader of a thread's state does. A server's own state
routes (Aegra's `GET /threads/{id}/state`) read the same JSON (docs/deployment.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json, sys
from langgraph.checkpoint.memory import InMemorySaver
from evident.alignment.models import Passage
from evident.context import EvidentContext
from evident.graph import build_graph
from evident.models import Citation, Rewrite

graph = build_graph(checkpointer=InMemorySaver())
thread = {"configurable": {"thread_id": "strict"}}
context = EvidentContext(corpus=[sys.argv[1]])
outs = [graph.invoke({"messages": [{"role": "user", "content": text}]}, thread, context=context)
        for text in ("How many days do I have to submit an expense report after a trip?", "And who approves it?")]
state = graph.get_state(thread).values
print(json.dumps({
    "statuses": [out["status"] for out in outs],
    "rewrite": Rewrite.model_validate(state["rewrite"]).turns,
    "citations": bool(state["citations"]) and all(Citation.model_validate(c).spans for c in state["citations"]),
    "passages": bool(state["passages"]) and all(Passage.model_validate(p).content for p in state["passages"]),
    "messages": [m["type"] for m in state["messages"]],
    "json": json.loads(json.dumps(state)) == state,
}))
"""


def test_a_follow_up_reads_its_json_checkpoints_back_in_strict_mode(examples: Path) -> None:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(examples)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Blocked deserialization" not in done.stderr and "unregistered type" not in done.stderr, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "statuses": ["answered", "answered"], "rewrite": 1, "citations": True, "passages": True,
        "messages": ["human", "ai", "human", "ai"], "json": True}
