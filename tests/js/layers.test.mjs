// The Layers view's rules, on documents shaped as the layers route answers them (no
// browser: the drawing itself is checked in tests/test_tab_layers.py).

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {pairParams, stateFromParams, stateParams} from '../../frontend/state.js';
import {basisText, basisTitle, captionText, countText, layerGroups, layerSummary, sortColumn}
  from '../../frontend/views/layers.js';

const total = (layer, basis, baseline, target) => ({
  layer, basis, baseline_us: baseline, target_us: target, baseline_share: baseline && baseline / 1000,
  target_share: target && target / 1000, speedup: baseline && target ? baseline / target : null,
});
const row = (layer, name, kind, baselineMean, targetMean, extra = {}) => ({
  layer, name, kind, baseline_calls: baselineMean === null ? null : 5, baseline_wall_us: baselineMean && baselineMean * 5,
  baseline_self_us: null, baseline_mean_us: baselineMean, target_calls: targetMean === null ? null : 5,
  target_wall_us: targetMean && targetMean * 5, target_self_us: null, target_mean_us: targetMean,
  speedup: baselineMean && targetMean ? baselineMean / targetMean : null,
  status: baselineMean === null ? 'target_only' : targetMean === null ? 'baseline_only' : 'matched', ...extra,
});
// application rows, then runtime rows, the larger first within each: the route's order
const ROWS = [
  row('application', 'Optimizer.step#Adam.step', 'user_annotation', 1364, 713),
  row('application', 'Optimizer.zero_grad#Adam.zero_grad', 'user_annotation', 34, 32),
  row('runtime', 'cudaLaunchKernel', 'cuda_runtime', null, 9.1),
  row('runtime', 'cuLaunchKernelEx', 'cuda_driver', null, 11.3),
  row('runtime', 'cudaDeviceSynchronize', 'cuda_runtime', null, 26.7),
];
const names = (groups) => groups.map((group) => [group.layer, group.rows.map((r) => r.name)]);

test('the summary always has the four layers in order; a layer neither run records has no total', () => {
  const document = {layers: [total('framework', 'self', 8856, 4883)]};
  const summary = layerSummary(document);
  assert.deepEqual(summary.map((entry) => entry.layer), ['application', 'framework', 'runtime', 'device']);
  assert.deepEqual(summary.map((entry) => entry.total === null), [true, false, true, true]);
  assert.equal(summary[1].total.baseline_us, 8856);
});

test('the basis in short and in full, the two runs\' where they differ', () => {
  assert.equal(basisText('self'), 'self time');
  assert.equal(basisText('kernel'), 'kernel time');
  assert.equal(basisText('self/wall'), 'self / wall time');
  assert.equal(basisText(null), 'not recorded');
  assert.match(basisTitle('self/wall'), /^self time: .*; wall time: /);
  assert.match(basisTitle(null), /neither run/);
});

test('rows are grouped by layer in the route\'s order, application first', () => {
  assert.deepEqual(names(layerGroups(ROWS)), [
    ['application', ['Optimizer.step#Adam.step', 'Optimizer.zero_grad#Adam.zero_grad']],
    ['runtime', ['cudaLaunchKernel', 'cuLaunchKernelEx', 'cudaDeviceSynchronize']],
  ]);
  // a layer the rows table does not know comes last, never lost
  const other = row('hardware', 'x', 'y', 1, 1);
  assert.deepEqual(layerGroups([other, ...ROWS]).map((group) => group.layer), ['application', 'runtime', 'hardware']);
  assert.deepEqual(layerGroups([]), []);
});

test('a sort orders each group by the column, missing values last either way', () => {
  const ascending = layerGroups(ROWS, {sort: 'target_mean_us', order: 'asc'});
  assert.deepEqual(names(ascending)[1][1], ['cudaLaunchKernel', 'cuLaunchKernelEx', 'cudaDeviceSynchronize']);
  const descending = layerGroups(ROWS, {sort: 'baseline_mean_us', order: 'desc'});
  assert.deepEqual(names(descending)[0][1], ['Optimizer.step#Adam.step', 'Optimizer.zero_grad#Adam.zero_grad']);
  assert.deepEqual(names(layerGroups(ROWS, {sort: 'baseline_mean_us', order: 'asc'}))[0][1],
                   ['Optimizer.zero_grad#Adam.zero_grad', 'Optimizer.step#Adam.step']);
  const byName = layerGroups(ROWS, {sort: 'name', order: 'asc'});
  assert.deepEqual(names(byName)[1][1], ['cuLaunchKernelEx', 'cudaDeviceSynchronize', 'cudaLaunchKernel']);
  // an unknown column (a hand-edited link) keeps the route's order
  assert.equal(sortColumn('nonsense'), null);
  assert.deepEqual(names(layerGroups(ROWS, {sort: 'nonsense', order: 'asc'})), names(layerGroups(ROWS)));
});

test('the filter keeps the rows whose name or kind holds it, any case; empty groups go', () => {
  assert.deepEqual(names(layerGroups(ROWS, {q: ' LAUNCH '})), [['runtime', ['cudaLaunchKernel', 'cuLaunchKernelEx']]]);
  assert.deepEqual(names(layerGroups(ROWS, {q: 'driver'})), [['runtime', ['cuLaunchKernelEx']]]);
  assert.deepEqual(layerGroups(ROWS, {q: 'nothing such'}), []);
  assert.equal(layerGroups(ROWS, {q: '   '}).length, 2);
});

test('the caption says the runs and whether times are per step; the count says what the filter kept', () => {
  const document = {baseline: 'cpu', target: 'gpu', per_step: true, layers: [], rows: [], notes: []};
  assert.match(captionText(document), /^cpu → gpu: times per profiled step;/);
  assert.match(captionText({...document, per_step: false}), /times in all \(not per step/);
  assert.equal(countText(13, 13), '13 rows');
  assert.equal(countText(2, 13), '2 of 13 rows');
  assert.equal(countText(1, 1), '1 row');
  assert.equal(countText(1200, 1200), '1,200 rows');
});

test('the route takes the selection\'s runs and sessions; the page, sort and filter are kept in the link', () => {
  const state = stateFromParams({view: 'layers', baseline: 'cpu', target: 'gpu', target_session: 's2',
                                 layers_sort: 'speedup', layers_order: 'asc', layers_q: 'launch'});
  assert.equal(state.page, 'layers');
  assert.deepEqual(state.layers, {sort: 'speedup', order: 'asc', q: 'launch'});
  assert.deepEqual(pairParams(state.selection), {baseline: 'cpu', target: 'gpu', target_session: 's2'});
  const params = stateParams(state);
  assert.equal(params.view, 'layers');
  assert.deepEqual([params.layers_sort, params.layers_order, params.layers_q], ['speedup', 'asc', 'launch']);
  assert.deepEqual(stateFromParams(params).layers, state.layers);
  // defaults stay out of the link
  const plain = stateFromParams({view: 'layers'});
  assert.deepEqual(plain.layers, {sort: null, order: 'desc', q: ''});
  assert.equal(pairParams(plain.selection), null);
  assert.deepEqual(Object.keys(stateParams(plain)), ['view']);
});
