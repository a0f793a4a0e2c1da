"""Dataset readers: one plain function per offline file format, registered in `READERS`, and the Hub readers.

`evaluation.tasks` calls the reader of a task's `offline.format` with the `offline:` settings its `READERS` entry
names (docs/evaluation.md, "Adding a dataset", says what each does). Any file may be gzip-compressed (.gz). The
record formats (tsv, jsonl, conll, squad) return one raw dict per example (cached in-process by `read_records`);
beir returns texts by id and judgements. The Hub source is read by `read_hub` and `read_hub_retrieval` (mteb/BEIR).
A file is read exactly as written or refused in one line naming it and the line: no cell is dropped or shifted.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # datasets is imported where a Hub dataset is read: task definitions load without it
    from datasets import Dataset


def read_tsv(path: str, columns: dict | None, header: bool = True) -> list[dict]:
    """One {field: stripped cell} per non-empty row of a TSV file (quoting off); `columns`: {field: header name}, or
    {field: 0-based column number} without a `header` row. Every row has as many cells as the header (without one:
    as the first row), so a tab inside a field is refused, never read as a shifted row."""
    columns = _required_columns(path, columns)
    with _open_text(path) as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        rows = [(reader.line_num, row) for row in reader if row]  # (line number, cells)
    if not rows:
        raise ValueError(f"{path} is empty; give it {'a header row and ' if header else ''}one example per row")
    first, width = rows[0][0], len(rows[0][1])
    if header:
        names, rows = rows[0][1], rows[1:]
        missing = [c for c in columns.values() if c not in names]
        if missing:
            raise ValueError(f"{path}: column(s) {missing} not in the header {names}; fix offline.columns")
        index = {field: names.index(col) for field, col in columns.items()}
    else:
        named = {field: col for field, col in columns.items() if not isinstance(col, int)}
        if named:
            raise ValueError(
                f"{path}: offline.header is false, so offline.columns must give 0-based column numbers, "
                f"not names {named}"
            )
        index = dict(columns)
        if max(index.values()) >= width:
            raise ValueError(
                f"{path}: line {first} has {width} cells, but offline.columns reads column {max(index.values())} "
                "(0-based); fix offline.columns"
            )
    for line, row in rows:
        if len(row) != width:
            raise ValueError(
                f"{path}: line {line} has {len(row)} tab-separated cells, line {first} "
                f"({'the header' if header else 'the first row'}) {width}: a tab inside a field shifts the columns "
                "(quoting is off); remove it, or give every row the same cells"
            )
    return [{field: row[i].strip() for field, i in index.items()} for _, row in rows]


def read_jsonl(path: str, columns: dict | None) -> list[dict]:
    """Records of a JSON-lines file: {field: object[key]} for `columns` {field: key}, one per non-empty line."""
    columns = _required_columns(path, columns)
    records = []
    with _open_text(path) as f:
        for n, line in enumerate(f):
            if line.strip():
                obj = json.loads(line)
                missing = [c for c in columns.values() if c not in obj]
                if missing:
                    raise ValueError(f"{path}: line {n + 1} lacks key(s) {missing}; fix offline.columns")
                records.append({field: obj[col] for field, col in columns.items()})
    return records


def _required_columns(path: str, columns: dict | None) -> dict:
    if not columns:
        raise ValueError(f"{path}: offline.columns (field -> column) is required for this format")
    return columns


def read_conll(
    path: str,
    token_column: int = 0,
    tag_column: int = -1,
    separator: str | None = None,
    comment_prefix: str | None = None,
    docstart: str | None = "-DOCSTART-",
    token_prefix: str | None = None,
) -> list[dict]:
    """One {"tokens", "tags"} per sentence of a CoNLL-style file, one token per line; a blank or `docstart`
    line ends a sentence, `comment_prefix` lines are skipped, tokens and tags stripped and kept as written. Every
    token line has as many columns as the first one: a line read otherwise (a token holding a space under the
    whitespace separator, a comment line) is refused naming it, never read with a column lost."""
    prefix = token_prefix or ""
    sentences, tokens, tags = [], [], []
    first = None  # (line number, columns, whether it starts with "#") of the first token line
    with _open_text(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if comment_prefix and line.startswith(comment_prefix):
                continue
            parts = [part.strip() for part in line.split(separator)] if line.strip() else []
            if not parts or parts[0] == docstart:
                if tokens:
                    sentences.append({"tokens": tokens, "tags": tags})
                tokens, tags = [], []
                continue
            first = first or (n, len(parts), line.lstrip().startswith("#"))
            _check_conll_line(path, n, line, parts, first, separator, max(token_column, tag_column))
            token, tag = parts[token_column], parts[tag_column]
            token = token[len(prefix) :] if prefix and token.startswith(prefix) else token
            if not token or not tag:
                raise ValueError(
                    f"{path}: line {n} ({line!r}) has an empty {'token' if not token else 'tag'}; check "
                    "token_column/tag_column/separator"
                )
            tokens.append(token)
            tags.append(tag)
    if tokens:
        sentences.append({"tokens": tokens, "tags": tags})
    return sentences


def _check_conll_line(path: str, n: int, line: str, parts: list, first: tuple, separator, needed: int) -> None:
    """Refuse a CoNLL token line whose columns are not those of the file's first token line (`first`: its line
    number, column count and whether it looks like a comment), or too few for `needed` (the largest column read),
    naming the line and the fix."""
    cells = line.strip().split("\t")
    if separator is None and len(cells) > 1 and len(cells) != len(parts):
        raise ValueError(
            f"{path}: line {n} ({line!r}) has {len(cells)} tab-separated cells but {len(parts)} whitespace-separated "
            'columns: a token or tag holds a space; set offline.separator: "\\t" to read it as written'
        )
    if len(parts) != first[1]:
        commented = first[2] or line.lstrip().startswith("#")
        comment = 'a comment line? set offline.comment_prefix (e.g. "#"); ' if commented else ""
        raise ValueError(
            f"{path}: line {n} ({line!r}) has {len(parts)} columns, line {first[0]} {first[1]}: {comment}every token "
            "line needs the same columns; check offline.separator/comment_prefix"
        )
    if len(parts) <= needed:
        raise ValueError(f"{path}: line {n} has {len(parts)} columns; check token_column/tag_column/separator")


def read_squad(path: str) -> list[dict]:
    """One {"id", "title", "question", "context", "answers": {"text": [...], "answer_start": [...]}} per question of
    a SQuAD v1.1 / v2.0 JSON file; an `is_impossible` question has empty answer lists."""
    with _open_text(path) as f:
        data = json.load(f)["data"]
    records = []
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa["answers"]
                records.append(
                    {
                        "id": qa["id"],
                        "title": article.get("title", ""),
                        "question": qa["question"],
                        "context": paragraph["context"],
                        "answers": {
                            "text": [a["text"] for a in answers],
                            "answer_start": [a["answer_start"] for a in answers],
                        },
                    }
                )
    return records


def read_beir(
    corpus: str, queries: str, qrels: dict[str, str], doc_template: str = "{text}"
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, dict[str, int]]]]:
    """A BEIR folder's ({doc id: `doc_template` over title and text}, {query id: query}, {role: qrels})."""
    docs = {
        r["_id"]: doc_template.format(title=r.get("title", ""), text=r["text"]).strip()
        for r in _read_beir_jsonl(corpus, ("_id", "text"))
    }
    texts = {r["_id"]: r["text"] for r in _read_beir_jsonl(queries, ("_id", "text"))}
    return docs, texts, {role: read_qrels(path) for role, path in qrels.items()}


@functools.lru_cache(maxsize=16)
def _read_beir_jsonl(path: str, required: tuple[str, ...] = ()) -> tuple[dict, ...]:
    records = []
    with _open_text(path) as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{path}: line {n + 1} is not JSON ({error}); a BEIR corpus/queries file is JSON lines"
                ) from None
            missing = [k for k in required if not isinstance(record, dict) or k not in record]
            if missing:
                raise ValueError(
                    f'{path}: line {n + 1} lacks {missing}; BEIR corpus/queries lines need {{"_id": ..., "text": ...}}'
                )
            records.append(record)
    return tuple(records)


def read_qrels(path: str) -> dict[str, dict[str, int]]:
    """A BEIR qrels TSV: header `query-id<TAB>corpus-id<TAB>score`, then one judgement per line."""
    qrels: dict[str, dict[str, int]] = {}
    with _open_text(path) as f:
        rows = [row for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if row]
    if rows and len(rows[0]) >= 3 and rows[0][:2] != ["query-id", "corpus-id"] and not _is_number(rows[0][2]):
        raise ValueError(f"{path}: header {rows[0]} is not BEIR's query-id<TAB>corpus-id<TAB>score")
    start = 1 if rows and rows[0][:2] == ["query-id", "corpus-id"] else 0
    for n, row in enumerate(rows[start:], start + 1):
        if len(row) < 3 or not _is_number(row[2]):
            raise ValueError(
                f"{path}: line {n} is {row!r}, not query-id<TAB>corpus-id<TAB>score (tab-separated, numeric score)"
            )
        qrels.setdefault(row[0], {})[row[1]] = int(float(row[2]))
    return qrels


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class Reader:
    """An offline format: its reader, and the `offline:` settings passed to it as keyword arguments."""

    read: Callable  # a record reader `read(path, **options) -> list[dict]`, or for beir `read_beir`
    options: tuple[str, ...] = ()  # names of the `OfflineSource` fields the reader takes
    records: bool = True  # a record format (sc, tc, qa tasks); False for beir, read by the ir loader


READERS: dict[str, Reader] = {
    "tsv": Reader(read_tsv, ("columns", "header")),
    "jsonl": Reader(read_jsonl, ("columns",)),
    "conll": Reader(
        read_conll, ("token_column", "tag_column", "separator", "comment_prefix", "docstart", "token_prefix")
    ),
    "squad": Reader(read_squad),
    "beir": Reader(read_beir, ("doc_template",), records=False),
}


def read_records(fmt: str, path: Path, options: dict) -> tuple[dict, ...]:
    """The raw records of one file, read with `options` and cached in-process: do not mutate them."""
    return _read_file(fmt, str(path), path.stat().st_mtime, json.dumps(options, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _read_file(fmt: str, path: str, mtime: float, options_json: str) -> tuple[dict, ...]:
    record_formats = sorted(name for name, reader in READERS.items() if reader.records)
    if fmt not in record_formats:
        raise ValueError(f"{path}: format {fmt!r} has no record reader; use one of {record_formats}")
    try:
        return tuple(READERS[fmt].read(path, **json.loads(options_json)))
    except (
        KeyError,
        IndexError,
        TypeError,
        json.JSONDecodeError,
        UnicodeDecodeError,
        gzip.BadGzipFile,
        EOFError,
    ) as error:
        raise ValueError(
            f"{path} is not a valid {fmt} file ({type(error).__name__}: {error}); check offline.format and the file"
        ) from None


def _open_text(path: str):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def hub_split(path: str, name: str | None, split: str | None, revision: str | None) -> Dataset:
    """One split of a Hub (or local folder) dataset; with split None the dataset must have a single split."""
    import datasets

    loaded = datasets.load_dataset(path, name, revision=revision)
    if split is None:
        if len(loaded) != 1:
            raise ValueError(f"{path} ({name}) has splits {list(loaded)}; name the one to use in the task YAML")
        split = next(iter(loaded))
    if split not in loaded:
        raise ValueError(f"{path} ({name}) has no split {split!r}; available: {list(loaded)}")
    return loaded[split]


def read_hub(
    path: str, name: str | None, revision: str | None, splits: dict[str, str], columns: dict | None
) -> dict[str, list[dict]]:
    """{role: [{field: value}]} of the `splits` ({role: Hub split}) of a Hub dataset or local folder, `columns`
    {field: column} kept (None: all), `ClassLabel` integers replaced by their names."""
    records = {}
    for role, split in splits.items():
        ds = hub_split(path, name, split, revision)
        kept = columns or {c: c for c in ds.column_names}
        missing = [c for c in kept.values() if c not in ds.column_names]
        if missing:
            raise ValueError(f"{path} ({name}): split {split!r} lacks column(s) {missing}; fix hub.columns")
        rows = ds.select_columns(list(dict.fromkeys(kept.values()))).to_list()
        names = {field: _class_names(ds.features[col]) for field, col in kept.items()}
        records[role] = [{field: _named(row[col], names[field]) for field, col in kept.items()} for row in rows]
    return records


def _class_names(feature) -> list[str] | None:
    from datasets import ClassLabel

    feature = getattr(feature, "feature", feature)  # Sequence / List of ClassLabel
    return list(feature.names) if isinstance(feature, ClassLabel) else None


def _named(value, names: list[str] | None):
    if names is None:
        return value
    return [names[v] for v in value] if isinstance(value, list) else names[value]


def read_hub_retrieval(
    path: str,
    revision: str | None,
    corpus: dict,
    queries: dict,
    qrels: dict,
    train_pairs: dict | None = None,
    doc_template: str = "{text}",
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, dict[str, int]]], Dataset | None]:
    """The mteb/BEIR layout on the Hub as `read_beir` plus the training pairs Dataset (or None): `corpus`,
    `queries` {name, split}, `qrels` {name, splits: {role: split}}, `train_pairs` {path, name, split, columns}."""
    corpus_ds = hub_split(path, corpus.get("name"), corpus.get("split"), revision)
    id_col = "_id" if "_id" in corpus_ds.column_names else "id"
    docs = {str(r[id_col]): doc_template.format(title=r.get("title") or "", text=r["text"]).strip() for r in corpus_ds}
    queries_ds = hub_split(path, queries.get("name"), queries.get("split"), revision)
    id_col = "_id" if "_id" in queries_ds.column_names else "id"
    texts = {str(r[id_col]): r["text"] for r in queries_ds}
    judgements = {}
    for role, split in qrels["splits"].items():
        for r in hub_split(path, qrels.get("name"), split, revision):
            judgements.setdefault(role, {}).setdefault(str(r["query-id"]), {})[str(r["corpus-id"])] = int(r["score"])
    pairs = None
    if train_pairs:
        ds = hub_split(
            train_pairs["path"], train_pairs.get("name"), train_pairs.get("split"), train_pairs.get("revision")
        )
        columns = train_pairs.get("columns") or {"query": "query", "positive": "positive"}
        from datasets import Dataset

        pairs = Dataset.from_dict({field: ds[col] for field, col in columns.items()})
    return docs, texts, judgements, pairs
