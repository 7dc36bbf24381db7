"""Fixtures shared by the curation tests (tests/core/test_curate_*.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def passes(monkeypatch) -> list[bool]:
    """`ids_aside` of each budgeted evaluation pass (a second pass, False: the first one failed)."""
    from robodata.curate import select as select_module

    calls: list[bool] = []
    real = select_module._capped

    def capped(spec, source, predicate_for, fields, ids_aside):
        calls.append(ids_aside)
        return real(spec, source, predicate_for, fields, ids_aside)

    monkeypatch.setattr(select_module, "_capped", capped)
    return calls
