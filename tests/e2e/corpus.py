"""What the e2e deployments serve: the bundled examples plus an HR folder with one restricted page
(`acl: group:executives`) that no anonymous caller may see, the question they are asked, and the HR
code-word page of the deployments with authentication."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from evident.web.auth import token_digest

Q = "How many days do I have to submit an expense report after a trip?"
# Words of the restricted page: none of them may reach a caller who is not an executive.
SECRET_MARKERS = ("4.2 million", "exec-comp", "Executive compensation")

RESTRICTED = """---
url: https://hr.example/exec-comp
title: Executive compensation
acl: group:executives
---
# Executive compensation

The executive bonus pool for 2025 is 4.2 million USD. It is approved by the board in January.
"""
PUBLIC = """---
url: https://hr.example/bonus
title: Staff bonus
---
# Staff bonus

The annual bonus for staff is paid in March. The staff bonus pool is set by the board each year.
"""


# A page only `group:hr` may read, for the deployments with authentication (its word must never reach others).
SECRET_WORD = "BLUEHERON-7731"
HR_PAGE = f"""---
url: https://hr.example/code-words
title: HR code words
acl: group:hr
---
# HR code words

The HR escalation code word for 2025 is {SECRET_WORD}. It is used for confidential cases only.
"""
HR_QUERY = "What is the HR escalation code word for 2025?"


def write_hr_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "exec-comp.md").write_text(RESTRICTED, encoding="utf-8")
    (folder / "staff-bonus.md").write_text(PUBLIC, encoding="utf-8")
    return folder


def server_env(root: Path, examples: Path, **extra: str) -> dict[str, str]:
    """The served corpus: the examples plus an HR folder with one restricted page."""
    hr = write_hr_corpus(root / "hr")
    # By words, as every process the tests start (tests/conftest.py): the server's environment is scrubbed of
    # EVIDENT_*, and each deployment would otherwise embed its index on its first query (~30 s here).
    return {"EVIDENT_CORPUS": os.pathsep.join([str(examples), str(hr)]),
            "EVIDENT_INDEX_DIR": str(root / "indexes"), "EVIDENT_EMBEDDINGS": "none", **extra}


def tokens_file(path: Path, users: Mapping[str, tuple[str, list[str]]]) -> Path:
    """A bearer-tokens file (`EVIDENT_AUTH_TOKENS_FILE`) at `path`: each token, stored as its SHA-256 digest,
    for its (user, groups)."""
    path.write_text(json.dumps([{"sha256": token_digest(token), "user": user, "groups": groups}
                                for token, (user, groups) in users.items()]), encoding="utf-8")
    return path


def hr_secured_env(root: Path, examples: Path, users: Mapping[str, tuple[str, list[str]]]) -> dict[str, str]:
    """`server_env` with a tokens file for `users` and one more folder, `hr-only`, holding `HR_PAGE` (a page
    only the HR group may read): the deployment of the served agent, tool and MCP tests."""
    (root / "hr-only").mkdir()
    (root / "hr-only" / "code-words.md").write_text(HR_PAGE, encoding="utf-8")
    env = server_env(root, examples, EVIDENT_AUTH_TOKENS_FILE=str(tokens_file(root / "tokens.json", users)))
    env["EVIDENT_CORPUS"] = os.pathsep.join([env["EVIDENT_CORPUS"], str(root / "hr-only")])
    return env
