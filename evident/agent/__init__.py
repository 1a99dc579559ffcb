"""EvidenT as a part of someone else's agent (DESIGN §3c): the tool, `verify_answer`, the agent graph."""
