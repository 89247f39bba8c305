// The Memory view's plot titles, from series shaped as the memory route answers them (no
// browser: the plots themselves are checked in tests/test_tab_memory.py).

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {plotTitle} from '../../frontend/views/memory.js';

const plot = (device, baseline, target) => ({
  device,
  series: [
    ...(baseline === undefined ? [] : [{side: 'baseline', device, peak_bytes: baseline}]),
    ...(target === undefined ? [] : [{side: 'target', device, peak_bytes: target}]),
  ],
});

test('a device both runs use has the ratio of their peaks', () => {
  assert.equal(plotTitle(plot('GPU:0', 70.9 * 2 ** 20, 141 * 2 ** 20)), 'GPU:0 · peak 70.9 MiB → 141 MiB (1.99×)');
});

test('a device one run barely uses has no ratio (issue 51: "9.14 MiB → 4 B (0.000000×)")', () => {
  const title = plotTitle(plot('CPU', 9.14 * 2 ** 20, 4));
  assert.equal(title, 'CPU · peak 9.14 MiB → 4 B (the target barely uses this device: no ratio)');
  assert.ok(!title.includes('0.00'));
  assert.match(plotTitle(plot('CPU', 4, 9.14 * 2 ** 20)), /the baseline barely uses/);
});

test('a device one run lacks shows a dash and no ratio', () => {
  assert.equal(plotTitle(plot('GPU:0', undefined, 2 ** 20)), 'GPU:0 · peak – → 1.00 MiB');
});
