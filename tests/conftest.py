from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "corpus"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes go to a per-session temp dir; no model, config or tracing leaks in from the machine."""
    monkeypatch.setenv("EVIDENT_INDEX_DIR", str(tmp_path_factory.getbasetemp() / "indexes"))
    for var in ("EVIDENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "EVIDENT_CONFIG", "EVIDENT_CORPUS",
                "EVIDENT_MODE", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def examples() -> Path:
    return EXAMPLES
