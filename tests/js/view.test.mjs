// The tab's copy of the row-view rule against the cases the server's copy passes
// (tests/golden/view_cases.json, checked for Python by tests/test_view_rule.py). The
// parameters go through state.js as the tab reads them from a link.
//
// A `/regex/` query is matched by the server only; the tab then keeps the keys the
// server matched. Here those are the case's expected keys, so a regex case checks what
// the tab does around the match (the other filters, the sort, top), not the match.

import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import {test} from 'node:test';

import {viewFromParams} from '../../frontend/state.js';
import {applyView, isRegexQuery} from '../../frontend/view.js';

const golden = JSON.parse(readFileSync(new URL('../golden/view_cases.json', import.meta.url), 'utf8'));

for (const {name, params, expected} of golden.cases) {
  test(name, () => {
    const view = viewFromParams(params);
    const regexKeys = isRegexQuery(view.q) ? new Set(expected) : null;
    assert.deepEqual(applyView(golden.rows, view, regexKeys).map((row) => row.key), expected);
  });
}
