"""What ``make mutate`` mutates, and the tests each part is judged by.

A :class:`Group` names modules of security- or decision-critical code and the few test files
that exercise them: only those tests run against its mutants, so the whole run takes minutes.
Keep each list short and fast; a test file that needs jobs in a sandbox belongs elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """Modules mutated together and the test files that must kill their mutants."""

    name: str
    modules: tuple[str, ...]
    """Source files, relative to the repository root."""
    tests: tuple[str, ...]
    """Test files (or node ids), relative to the repository root."""


GROUPS = (
    Group(
        "permissions",
        ("src/rsilab/expos/policy.py",),
        ("tests/expos/test_policy.py", "tests/expos/test_permission_matrix.py"),
    ),
    Group(
        "tool guards",
        ("src/rsilab/expos/guards.py",),
        (
            "tests/expos/test_guards.py",
            "tests/expos/test_dispatch.py",
            "tests/expos/tools/test_workspace.py",
        ),
    ),
    Group(
        "controller guards",
        ("src/rsilab/controller/guards.py",),
        ("tests/controller/test_guards.py",),
    ),
    Group(
        "acceptance",
        ("src/rsilab/controller/acceptance.py",),
        ("tests/controller/test_acceptance.py",),
    ),
    Group(
        "ledger verification",
        ("src/rsilab/store/ledger.py", "src/rsilab/store/verify.py"),
        (
            "tests/store/test_tamper.py",
            "tests/store/test_verify.py",
            "tests/store/test_damage.py",
            "tests/store/test_conformance.py",
        ),
    ),
)
"""The parts ``make mutate`` covers (issue 21, item 7)."""

TARGET = 0.90
"""Share of mutants the tests must kill in every group."""

_TEMP = "a name inside a private temporary folder the block itself removes: nothing reads it"
_TREE = "ArtifactStore.materialize treats every kind but 'file' as a tree"
_JSON_NATIVE = (
    "every field of the records and events is JSON-native (str, numbers, bool, None, lists, "
    "dicts, str enums), so a python-mode dump canonicalises to the same text"
)
_CODEC = "Python's codec names are case-insensitive: 'UTF-8' is 'utf-8'"
_SEQ = "inside `if row.seq != expected_seq`, `>` and `>=` agree"

EQUIVALENT: dict[tuple[str, str], str] = {
    # (function, the line every surviving mutant of it changes) -> why no test can tell
    (
        "rsilab.expos.guards.resolve_workspace_path",
        "resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()",
    ): "pathlib: root / an absolute path is that absolute path, so the test changes nothing",
    ("rsilab.controller.guards.TrainingGuards.check", 'tree = Path(tmp) / "tree"'): _TEMP,
    (
        "rsilab.controller.guards.TrainingGuards.check",
        'extra = self._extra_data_files(candidate, Path(tmp) / "data")',
    ): _TEMP,
    (
        "rsilab.controller.guards.TrainingGuards.check",
        'self.artifacts.materialize(candidate.harness_sha256, tree, "tree")',
    ): _TREE,
    ("rsilab.controller.guards.TrainingGuards._head_trains", 'tree = Path(tmp) / "tree"'): _TEMP,
    (
        "rsilab.controller.guards.TrainingGuards._head_trains",
        'self.artifacts.materialize(harness, tree, "tree")',
    ): _TREE,
    (
        "rsilab.controller.guards.TrainingGuards._head_trains",
        "trains = False  # an accepted head always loads; nothing to compare with",
    ): "the cached value is only used in a truth test, where None is False",
    ("rsilab.store.ledger.canonical_json", 'return rfc8785.dumps(value).decode("utf-8")'): _CODEC,
    (
        "rsilab.store.ledger.sha256_text",
        'return hashlib.sha256(text.encode("utf-8")).hexdigest()',
    ): _CODEC,
    (
        "rsilab.store.ledger.record_text",
        'return canonical_json(record.model_dump(mode="json"))',
    ): _JSON_NATIVE,
    (
        "rsilab.store.ledger.build_event",
        'text = canonical_json(event.model_dump(mode="json"))',
    ): _JSON_NATIVE,
    (
        "rsilab.store.ledger._check_chain",
        'what = "removed" if row.seq > expected_seq else "inserted or duplicated"',
    ): _SEQ,
    (
        "rsilab.store.ledger._check_chain",
        "expected_seq if row.seq > expected_seq else row.seq,",
    ): _SEQ,
    ("rsilab.store.verify._last_write", "return events[-1].seq if events else 0"): (
        "every record the blob check reaches was written by an event (verify_ledger fails "
        "first on one that was not, and then blobs are not checked): events is never empty"
    ),
    (
        "rsilab.store.verify._check_artifacts",
        "problem = _missing(store, sha, refs, collected.get(sha, []))",
    ): "_missing only tests the tombstones for truth: None and [] are both false",
    (
        "rsilab.store.verify._check_artifacts",
        'pending.setdefault(str(entry["sha256"]), ("file", []))',
    ): "only the kind 'tree' is treated apart; any other name reads as a file",
}
"""Surviving mutants no test can tell from the code: (function, the original line the mutant
changes, stripped) -> why. Every surviving mutant of a listed line counts as equivalent, so
list only lines where any change mutmut makes is harmless, and say why."""
