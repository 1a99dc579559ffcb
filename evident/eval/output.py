"""What `evident eval` writes to its output folder: report.md, results.json and the figures."""

from __future__ import annotations

import json
from pathlib import Path

from evident.eval.plots import write_plots
from evident.eval.report import EvalResult, markdown


def write_reports(result: EvalResult, out: Path) -> dict[str, Path]:
    """report.md, results.json and the PNG figures under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    images = write_plots(result, out)
    (out / "report.md").write_text(markdown(result, {k: p.name for k, p in images.items()}), encoding="utf-8")
    (out / "results.json").write_text(json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=1),
                                      encoding="utf-8")
    return {"report": out / "report.md", "results": out / "results.json", **images}
