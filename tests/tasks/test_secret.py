"""The lab secret is created once, whole, even by racing threads."""

from __future__ import annotations

import threading
from pathlib import Path

from rsilab.tasks import lab_secret


def _race(folder: Path, threads: int) -> tuple[list[bytes], list[BaseException]]:
    seen: list[bytes] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def create() -> None:
        barrier.wait()
        try:
            seen.append(lab_secret(folder))
        except BaseException as exc:  # collected: a failure in a thread must fail the test
            errors.append(exc)

    workers = [threading.Thread(target=create) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return seen, errors


def test_racing_creators_agree_and_never_see_a_partial_file(tmp_path: Path) -> None:
    for attempt in range(10):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        seen, errors = _race(folder, 6)
        assert not errors and len(set(seen)) == 1 and len(seen[0]) == 32
        assert [p.name for p in folder.iterdir()] == ["task-secret"]
        assert (folder / "task-secret").stat().st_mode & 0o777 == 0o600
