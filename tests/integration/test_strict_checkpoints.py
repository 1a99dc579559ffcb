"""A conversation's checkpoints under LangGraph's strict msgpack mode (`LANGGRAPH_STRICT_MSGPACK=true`).

LangGraph warns today that it "will block in a future version" the types of a checkpoint that no
allowlist names (`evident.models.Rewrite`, `Passage`, …), and strict mode blocks them now: a blocked
value comes back as a plain dict. The graph's own reads are allowed by the allowlist that LangGraph
derives from its state schema, so every model our state holds must be reachable from that schema's
type hints. This test runs a follow-up in strict mode (read when LangGraph is imported, hence a
process of its own) and requires the checkpointed models back as models, with nothing blocked.

A server's own state routes (Aegra's `GET /threads/{id}/state`) read checkpoints without the
graph's allowlist: there strict mode turns our models into dicts, which serialise to the same JSON
(docs/deployment.md)."""

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
    "rewrite": isinstance(state["rewrite"], Rewrite),
    "citations": bool(state["citations"]) and all(isinstance(c, Citation) for c in state["citations"]),
    "passages": bool(state["passages"]) and all(isinstance(p, Passage) for p in state["passages"]),
    "messages": len(state["messages"]),
}))
"""


def test_a_follow_up_reads_its_checkpoints_back_as_models_in_strict_mode(examples: Path) -> None:
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(examples)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "Blocked deserialization" not in done.stderr and "unregistered type" not in done.stderr, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "statuses": ["answered", "answered"], "rewrite": True, "citations": True, "passages": True, "messages": 4}
