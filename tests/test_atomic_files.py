"""Result files written whole or not at all (platform/core/atomic_files.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privlab.platform.core.atomic_files import atomic_text_file, write_json_atomically


def test_json_is_the_same_text_json_dumps_gives(tmp_path: Path) -> None:
    document = {"run_id": "r", "configurations": [{"id": f"c{i}", "metrics": {"m": i / 3}} for i in range(50)],
                "path": tmp_path}  # a value JSON does not know is written as its text
    target = tmp_path / "deeper" / "summary.json"
    write_json_atomically(target, document)
    assert target.read_text() == json.dumps(document, indent=2, default=str)
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]


def test_an_error_half_way_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    target.write_text("old\n")
    with pytest.raises(TypeError), atomic_text_file(target) as stream:
        stream.write("half of it")
        raise TypeError("the encoder failed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    with pytest.raises(ValueError, match="Circular reference"):
        loop: list = []
        loop.append(loop)
        write_json_atomically(tmp_path / "new.json", {"loop": loop})
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
