"""The Spark series' own goldens, through patchq.testing (as any series repo tests its patches).

Per patch: ``tests/golden/patches/<patch>/expect.toml`` (check status per release) and the
anchored definitions before/after. Regenerate: ``patchq test --regen`` or
``pytest tests/test_series_goldens.py --patchq-regen``.
"""

import pytest

from patchq import testing


@pytest.mark.parametrize("case", testing.cases(__file__), ids=testing.case_id)
def test_patch(case, patchq_regen):
    testing.assert_case(case, regen=patchq_regen)
