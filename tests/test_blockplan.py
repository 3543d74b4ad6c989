"""drsftp/ftp/blockplan.py: how a MODE E transfer cuts a file into blocks
(GFD.20).  Expected values come from the RFCs and the docs, written here, not
read back from the module's constants (docs/MUTATION.md: many of these tests
pin a rule a mutation run found open)."""

import pytest

from drsftp.ftp.blockplan import BlockPlan


def test_a_block_size_of_zero_is_refused_as_such():
    with pytest.raises(ValueError, match="block size"):
        BlockPlan([(0, 10)], 0)
