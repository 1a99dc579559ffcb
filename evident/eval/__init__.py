"""The evaluation harness behind `evident eval` (paper §5, §6, Appendices E–G).

- `dataset`: the question file (`{id, query, answerable?, gold_urls, gold_evidence?, answer?, history?}`);
- `followups`: a follow-up question (one with a `history`) made standalone by the graph's `rewrite` step;
- `retrieval`: one retrieval per query, shared by every method, recorded for replay;
- `methods`: EvidenT (the real graph over the shared documents), `bm25`, and the model baselines;
- `metrics`: the per-query measures; `stats`: confidence intervals and tests; `summary`: the rollup;
- `semantic`: SemMax and SemRecall (§6.2.3) by cosine of the configured embeddings;
- `ablation`: the (n, t) sweep of Appendix G over recorded extraction outputs;
- `report`, `plots`: report.md, results.json and the figures; `runner`: the resumable loop.

Nothing here is imported by `evident ask`: statistics and plotting libraries load only for `eval`, and
only the `eval` extra installs them (`extra`: which are missing, and the install line).
"""
