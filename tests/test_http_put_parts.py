"""drsftp/server/http/uploads.py: a PUT's part file (``.NAME.part``): no
PUT writes one by its name (403)."""

from __future__ import annotations

import os

import pytest
from httpserve import fetch, in_process, run


@pytest.fixture
def root(tmp_path):
    d = tmp_path / "srv"
    d.mkdir()
    return d


@pytest.fixture
def front(root):
    with in_process(root) as f:
        yield f


def test_a_put_of_a_part_files_name_is_refused(front, root):
    st, _, body = run(fetch(front, "PUT", "/.x.part", data=b"EVIL"))
    assert st == 403 and b"part file" in body
    (root / "d").mkdir()
    assert run(fetch(front, "PUT", "/d/.y.part", data=b"EVIL"))[0] == 403
    assert sorted(os.listdir(root)) == ["d"] and not os.listdir(root / "d")
