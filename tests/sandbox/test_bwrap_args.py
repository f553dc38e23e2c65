"""The bubblewrap command line: which host folders a job sees."""

from __future__ import annotations

from pathlib import Path

from rsilab.sandbox._bwrap_args import bundled_python_stdlibs


def test_bundled_python_stdlibs_are_found_for_hiding(tmp_path: Path) -> None:
    sdk = tmp_path / "lib/some-sdk/platform/bundled/lib/python3.12"
    sdk.mkdir(parents=True)
    (sdk / "os.py").write_text("'''docstrings live here'''\n")
    dynload = tmp_path / "lib/other/python3.10"
    (dynload / "lib-dynload").mkdir(parents=True)
    (tmp_path / "lib/python3-tools").mkdir()  # a python3* name that is no stdlib
    too_deep = tmp_path / "a/b/c/d/e/f/g/h/python3.9"
    too_deep.mkdir(parents=True)
    (too_deep / "os.py").write_text("")
    found = bundled_python_stdlibs([str(tmp_path)], depth=7)
    assert found == sorted([sdk, dynload])
