"""Each patch of this series on each release of its expected output (patchq.testing).

Expected `patchq check` verdicts (series/diffs/<patch>.expect.toml) and each patch's diff
per release (series/diffs/<release>/<patch>.diff). Regenerate them: `patchq test --regen`
or `pytest --patchq-regen`.
"""

import pytest

from patchq import testing

pytestmark = pytest.mark.wheel  # real releases (this checkout's wheel layer)


@pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
def test_patch(case, patchq_regen):
    testing.assert_case(case, regen=patchq_regen)
