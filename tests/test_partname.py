"""drsftp/ftp/partname.py: the name a file is written under until it is complete.
Expected values come from the RFCs and the docs, written here, not read back
from the module's constants (docs/MUTATION.md: many of these tests pin a rule
a mutation run found open)."""

import pytest

from drsftp.ftp.partname import final_name, partial_name

# -- session helpers: partial names, URLs, ~/.netrc -----------------------------------

@pytest.mark.parametrize("path", ["d/NAME", "/a/b/x", "x", "d/.hidden", "d/a.part"])
def test_the_final_name_of_a_partial_name_is_the_name_it_stands_for(path):
    assert final_name(partial_name(path)) == path


@pytest.mark.parametrize("path", ["d/x.part", "d/.x", "d/.part", "d/..part", "..part", "d/x"])
def test_a_name_that_is_no_partial_name_is_its_own_final_name(path):
    """A partial name is "." + NAME + ".part" with NAME not empty."""
    assert final_name(path) == path


def test_a_downloads_part_name_and_back():
    from drsftp.ftp.partname import download_part, downloaded_name

    assert download_part("d/big.iso") == "d/big.iso.part"
    assert downloaded_name("big.iso.part") == "big.iso"
    assert downloaded_name("big.iso") is None and downloaded_name(".part") is None
    assert downloaded_name(download_part("x.part")) == "x.part"
