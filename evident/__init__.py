"""EvidenT: trustworthy enterprise question answering with verified, span-level citations.

Kept import-light on purpose: `evident.alignment` and the CLI's fast commands must not pull in
LangChain or LangGraph. Import the graph from `evident.graph`.
"""

__version__ = "0.1.0"
