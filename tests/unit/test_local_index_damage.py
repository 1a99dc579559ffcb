"""The embedded index heals or says how to: damaged Tantivy files, Rust panics, damaged SQLite,
vanished and renamed corpus folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evident.connectors.index.embedded import IndexFileError, LocalIndex, rebuild_index
from evident.connectors.index.loaders import CorpusError
from evident.connectors.index.ranking import MirrorError, TantivyMirror, tantivy_errors

RECORDS = [{"url": f"https://w/{i}", "title": f"Topic {i}", "text": f"Policy {i} covers item{i} and shared words. " * 8}
           for i in range(400)]


def write_jsonl(path: Path, records: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def top(index: LocalIndex, query: str) -> list[str]:
    return [doc.url for doc, _ in index.search(query, 3)]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "c" / "docs.jsonl", RECORDS)
    target = tmp_path / "i.sqlite3"
    with LocalIndex(target) as index:
        index.refresh([tmp_path / "c" / "docs.jsonl"])
    return target


def segment_files(target: Path) -> list[Path]:
    mirror = Path(f"{target}.tantivy")
    return [p for p in mirror.iterdir() if p.suffix in {".idx", ".term", ".pos", ".store", ".fieldnorm", ".fast"}]


def damage(path: Path, *, keep_footer: bool) -> None:
    """Overwrite bytes in the body of `path` (keeping Tantivy's footer, so only checksums can tell)."""
    data = bytearray(path.read_bytes())
    end = len(data) - 200 if keep_footer else len(data)
    for i in range(len(data) // 8, max(len(data) // 8 + 1, end), 5):
        data[i] = (data[i] + 0x5B) % 256
    # In place, as a disk fault would: truncating a file another thread has mapped ends in SIGBUS.
    with path.open("r+b") as handle:
        handle.write(data)


@pytest.mark.parametrize("keep_footer", [True, False])
@pytest.mark.parametrize("suffix", [".fieldnorm", ".idx", ".term", ".store"])
def test_damaged_tantivy_file_is_detected_on_open_and_rebuilt(
    built: Path, suffix: str, keep_footer: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalIndex(built, read_only=True) as index:
        expected = top(index, "item7 policy")
    assert expected[0] == "https://w/7"
    [file] = [p for p in segment_files(built) if p.suffix == suffix]
    damage(file, keep_footer=keep_footer)
    mirror = TantivyMirror(Path(f"{built}.tantivy"), title_weight=4)
    marker = mirror.marker()
    assert marker is not None and not mirror.in_sync(*marker)  # the damaged file fails its checksum
    with LocalIndex(built) as index:
        assert index.mirror_generation is not None  # rebuilt and trusted again, not left to FTS5
        assert top(index, "item7 policy") == expected
    assert "Tantivy index damaged, rebuilding it from SQLite" in caplog.text
    marker = mirror.marker()
    assert marker is not None and mirror.in_sync(*marker)  # the rebuilt directory matches its own checksums


def test_read_only_open_of_a_damaged_directory_searches_with_sqlite(built: Path) -> None:
    for file in segment_files(built):
        damage(file, keep_footer=True)
    with LocalIndex(built, read_only=True) as index:
        assert index.mirror_generation is None
        assert top(index, "item12")[0] == "https://w/12"


class PanicException(BaseException):
    """What pyo3 raises for a Rust panic: a BaseException, recognised by its name."""


def test_a_rust_panic_during_search_rebuilds_the_directory_and_answers(
    built: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    original = TantivyMirror.top
    calls: list[int] = []

    def panics_once(self: TantivyMirror, *args: object, **kwargs: object) -> list[tuple[str, float]]:
        calls.append(1)
        if len(calls) == 1:
            raise PanicException("called `Option::unwrap()` on a `None` value\nstack backtrace: ...")
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(TantivyMirror, "top", panics_once)
    rebuilt: list[int] = []
    original_rebuild = TantivyMirror.rebuild
    monkeypatch.setattr(TantivyMirror, "rebuild", lambda self, *a: (rebuilt.append(1), original_rebuild(self, *a))[1])
    with LocalIndex(built) as index:
        assert top(index, "item9")[0] == "https://w/9"
    assert rebuilt == [1] and len(calls) == 2
    assert "Tantivy panicked (called `Option::unwrap()` on a `None` value)" in caplog.text


def test_panics_become_mirror_errors_but_interrupts_do_not(tmp_path: Path) -> None:
    with pytest.raises(MirrorError, match="panicked"), tantivy_errors(tmp_path):
        raise PanicException("boom")
    with pytest.raises(KeyboardInterrupt), tantivy_errors(tmp_path):
        raise KeyboardInterrupt


# -- SQLite damage -------------------------------------------------------------------------------------


def damage_sqlite(path: Path) -> None:
    with path.open("r+b") as handle:
        for page in range(4096, path.stat().st_size, 4096):
            handle.seek(page)
            handle.write(b"\xab" * 64)


def test_damaged_sqlite_file_says_how_to_rebuild(built: Path, tmp_path: Path) -> None:
    damage_sqlite(built)
    with pytest.raises(IndexFileError) as caught:
        with LocalIndex(built) as index:
            index.refresh([tmp_path / "c" / "docs.jsonl"])
    message = str(caught.value)
    assert "damaged" in message and "evident index --rebuild" in message and str(built) in message


def test_rebuild_replaces_a_damaged_file(built: Path, tmp_path: Path) -> None:
    damage_sqlite(built)
    stats, count = rebuild_index(built, [tmp_path / "c" / "docs.jsonl"])
    assert (stats.added, count) == (len(RECORDS), len(RECORDS))
    with LocalIndex(built) as index:
        assert top(index, "item3")[0] == "https://w/3"
    assert not Path(f"{built}.rebuild").exists()


def test_failed_rebuild_keeps_the_old_file(built: Path, tmp_path: Path) -> None:
    before = built.read_bytes()
    with pytest.raises(CorpusError, match="no such file"):
        rebuild_index(built, [tmp_path / "gone"])
    assert built.read_bytes() == before


# -- vanished and renamed corpus folders ---------------------------------------------------------------


def folder_corpus(root: Path) -> Path:
    for i in range(3):
        (root / f"d{i}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"d{i}.md").write_text(f"---\nurl: KB-{i}\n---\n# Doc {i}\n\nThe answer number {i} is here.\n")
    return root


def test_vanished_corpus_path_is_an_error_and_the_index_is_kept(tmp_path: Path) -> None:
    corpus = folder_corpus(tmp_path / "docs")
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([corpus])
        shutil.rmtree(corpus)
        with pytest.raises(CorpusError, match="docs: no such file or directory"):
            index.refresh([corpus])
        assert index.count() == 3 and top(index, "answer number 1")[0] == "KB-1"


def test_renamed_corpus_folder_keeps_its_documents(tmp_path: Path) -> None:
    corpus = folder_corpus(tmp_path / "docs")
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([corpus])
        renamed = corpus.rename(tmp_path / "handbook")
        stats = index.refresh([renamed])
        assert index.count() == 3 and (stats.added, stats.removed) == (3, 3)
        assert top(index, "answer number 2")[0] == "KB-2"
        assert index.roots() == [str(renamed.resolve())]


def test_a_refresh_finding_no_documents_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    corpus = folder_corpus(tmp_path / "docs")
    empty = tmp_path / "empty"
    empty.mkdir()
    with LocalIndex(tmp_path / "i.sqlite3") as index:
        index.refresh([corpus])
        with pytest.raises(CorpusError, match="no documents found"):
            index.refresh([empty])
        assert index.count() == 3 and index.roots() == [str(corpus.resolve())]
