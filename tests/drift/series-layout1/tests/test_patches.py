"""Each patch of this series on each release of its goldens (patchq.testing).

Expected `patchq check` verdicts and the golden definitions before/after live in
tests/goldens/<patch>/. Regenerate them: `patchq test --regen` or `pytest --patchq-regen`.
"""

import pytest

from patchq import testing


@pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
def test_patch(case, patchq_regen):
    testing.assert_case(case, regen=patchq_regen)
