"""The Spark series' expected output, through patchq.testing (as any series repo tests its patches).

Per patch: ``series/diffs/<patch>.expect.toml`` (check status per release) and its diff on
each release, ``series/diffs/<release>/<patch>.diff``. Regenerate: ``patchq test --regen``
or ``pytest runtime/tests/test_patches.py --patchq-regen``.
"""

import pytest

from patchq import testing

pytestmark = pytest.mark.wheel  # real releases


@pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
def test_patch(case, patchq_regen):
    testing.assert_case(case, regen=patchq_regen)
