// The tab's state in a link: what is read is written back the same, defaults left out.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {hasRepeats, matrixParams, selectionParams, stateFromParams, stateParams, sweepCsvParams, sweepParams,
        trendParams, viewParams, warmupSteps} from '../../frontend/state.js';
import {queryString} from '../../frontend/api.js';

test('a link with every parameter is written back as it was read', () => {
  const link = {baseline: 'tf1/mlp_cpu', target: 'tf1/mlp_gpu', group_by: 'type', baseline_session: '2026_01_05',
                target_session: '2026_01_06', q: 'conv', status: 'matched,target_only', side: 'device',
                min_us: '1000', sort: 'speedup', order: 'asc', top: '15', significant: '1', repeats: '1', view: 'sweep',
                model: 'torch/cnn', sweep_top: '5', sweep_group_by: 'type', sweep_series_by: 'precision',
                sweep_device: 'GPU', trend_runs: 'cnn*,torch2.5/cnn_cpu_bs6',
                trend_order: 'sidecar:versions.torch', trend_top: '4', trend_group_by: 'type',
                matrix_reference: 'GPU · bf16 · torch.compile', matrix_warmup: '0'};
  assert.deepEqual(stateParams(stateFromParams(link)), link);
});

test('the trend view and its settings are kept in the link', () => {
  const state = stateFromParams({view: 'trend', trend_runs: ' cnn* ', trend_order: 'run', trend_top: '80'});
  assert.equal(state.page, 'trend');
  assert.deepEqual(state.trend, {runs: 'cnn*', order_by: 'run', top: 50, group_by: 'name'});
  assert.deepEqual(stateParams(state), {view: 'trend', trend_runs: 'cnn*', trend_order: 'run', trend_top: '50'});
  assert.deepEqual(trendParams(state.trend, 'a,b'), {runs: 'a,b', order_by: 'run', top: '50', group_by: 'name'});
});

test('the matrix view, its reference, its warm-up and its step part are kept in the link', () => {
  const state = stateFromParams({view: 'matrix', matrix_reference: ' GPU/fp32/eager ', matrix_warmup: '2',
                                 matrix_part: 'input'});
  assert.equal(state.page, 'matrix');
  assert.deepEqual(state.matrix, {reference: 'GPU/fp32/eager', warmup: 2, part: 'input'});
  assert.deepEqual(stateParams(state),
                   {view: 'matrix', matrix_reference: 'GPU/fp32/eager', matrix_warmup: '2', matrix_part: 'input'});
  assert.deepEqual(matrixParams(state.matrix), {reference: 'GPU/fp32/eager', warmup: '2', part: 'input'});
  // defaults: the route's reference, the warm-up detected per run, no part; none in the link nor asked for
  const plain = stateFromParams({view: 'matrix', matrix_warmup: 'soon'});
  assert.deepEqual(plain.matrix, {reference: null, warmup: null, part: null});
  assert.deepEqual(stateParams(plain), {view: 'matrix'});
  assert.deepEqual(matrixParams(plain.matrix), {});
});

test('warm-up steps are digits, as the matrix route takes them; zero is a choice, empty detects', () => {
  assert.deepEqual(['0', ' 3 ', '', '-1', '1.5', 'x', null, 4].map(warmupSteps), [0, 3, null, null, null, null, null, 4]);
});

test('a trend order the route does not take falls back to the recording time', () => {
  for (const order of ['bogus', 'sidecar:', 'sidecar:  ', '']) {
    assert.equal(stateFromParams({trend_order: order}).trend.order_by, 'recorded');
  }
  assert.equal(stateFromParams({trend_order: 'sidecar:model'}).trend.order_by, 'sidecar:model');
});

test('without runs typed, the trend follows the comparison and the link says nothing of them', () => {
  const state = stateFromParams({baseline: 'a', target: 'b', view: 'trend', trend_runs: '  '});
  assert.equal(state.trend.runs, null);
  assert.deepEqual(stateParams(state), {baseline: 'a', target: 'b', view: 'trend'});
});

test('op keys never come from a link nor go into one: the check gives them', () => {
  const state = stateFromParams({baseline: 'a', target: 'b', key: 'head', significant: '1'});
  assert.equal(state.view.keys, null);
  assert.equal(state.significant, true);
  state.view.keys = ['head'];
  assert.deepEqual(stateParams(state), {baseline: 'a', target: 'b', significant: '1'});
});

test('the compare route gets each key as its own parameter, commas and all', () => {
  const view = {...stateFromParams({}).view, keys: ['a,b', 'c&d', 'e'], top: 3};
  const params = {...selectionParams({baseline: 'x', target: 'y', group_by: 'name'}), ...viewParams(view)};
  const query = new URLSearchParams(queryString(params));
  assert.deepEqual(query.getAll('key'), ['a,b', 'c&d', 'e']);
  assert.equal(query.get('top'), '3');
  assert.equal(query.get('baseline'), 'x');
});

test('"pool repeats" is kept in the link and asks the compare route for run groups', () => {
  const state = stateFromParams({baseline: 'cnn_rep1', target: 'slow_rep1', repeats: '1'});
  assert.equal(state.selection.repeats, true);
  assert.deepEqual(stateParams(state), {baseline: 'cnn_rep1', target: 'slow_rep1', repeats: '1'});
  assert.equal(selectionParams(state.selection).repeats, '1');
  // the page asks without it where the runs have no repeats; the link keeps the choice
  assert.equal('repeats' in selectionParams(state.selection, false), false);
  assert.deepEqual(stateParams(state), {baseline: 'cnn_rep1', target: 'slow_rep1', repeats: '1'});
  // the CSV export carries it beside the view's parameters
  const query = new URLSearchParams(queryString({...selectionParams(state.selection), ...viewParams(state.view)}));
  assert.equal(query.get('repeats'), '1');
  // off: neither in the link nor asked for
  state.selection.repeats = false;
  assert.deepEqual(stateParams(state), {baseline: 'cnn_rep1', target: 'slow_rep1'});
  assert.equal('repeats' in selectionParams(state.selection), false);
  for (const value of ['0', 'yes', '', undefined]) {
    assert.equal(stateFromParams({baseline: 'a', target: 'b', repeats: value}).selection.repeats, false);
  }
});

test('"pool repeats" applies where either run chosen is one recording of several', () => {
  // the server counts each run's repeat group: a run recorded once with --repeats has nothing to pool
  const runs = [{run: 'cnn_rep1', repeat: 1, repeat_runs: 3}, {run: 'cnn_cpu', repeat: null, repeat_runs: 1},
                {run: 'cnn_gpu', repeat: null, repeat_runs: 1}, {run: 'alone_rep1', repeat: 1, repeat_runs: 1},
                {run: 'old'}];
  assert.equal(hasRepeats({baseline: 'cnn_rep1', target: 'cnn_gpu'}, runs), true);
  assert.equal(hasRepeats({baseline: 'cnn_gpu', target: 'cnn_rep1'}, runs), true);
  assert.equal(hasRepeats({baseline: 'cnn_cpu', target: 'cnn_gpu'}, runs), false);
  assert.equal(hasRepeats({baseline: 'alone_rep1', target: 'cnn_gpu'}, runs), false);
  assert.equal(hasRepeats({baseline: 'old', target: 'unknown'}, runs), false);
  assert.equal(hasRepeats({baseline: null, target: null}, runs), false);
});

test('defaults are left out of the link', () => {
  const state = stateFromParams({baseline: 'a', target: 'b', group_by: 'name', status: 'matched,baseline_only,target_only',
                                 side: 'all', order: 'desc', sweep_top: '10', sweep_group_by: 'name'});
  assert.deepEqual(stateParams(state), {baseline: 'a', target: 'b'});
});

test('nothing of the comparison before runs are chosen', () => {
  assert.deepEqual(stateParams(stateFromParams({q: 'conv', view: 'sweep'})), {view: 'sweep'});
});

test('values the tab cannot use fall back to the defaults', () => {
  const state = stateFromParams({status: 'bogus', side: 'left', min_us: '-3', top: '0', order: 'up', group_by: 'x',
                                 sweep_top: 'many'});
  assert.deepEqual(state.view, {q: '', status: ['matched', 'baseline_only', 'target_only'], side: 'all', min_us: 0,
                                sort: null, order: 'desc', top: null, keys: null});
  assert.equal(state.significant, false);
  assert.equal(state.selection.group_by, 'name');
  assert.equal(state.sweep.top, 10);
});

test('a link asking to plot more ops than the sweep route takes plots the most it takes', () => {
  assert.equal(stateFromParams({model: 'torch/cnn', sweep_top: '500'}).sweep.top, 50);
});

test('a sweep asks for its lines and the device held only where the lines are not devices', () => {
  const byPrecision = stateFromParams({model: 'torch/cnn', sweep_series_by: 'precision', sweep_device: 'GPU'}).sweep;
  assert.deepEqual(sweepParams(byPrecision),
                   {model: 'torch/cnn', top: '10', group_by: 'name', series_by: 'precision', device: 'GPU'});
  const byDevice = stateFromParams({model: 'torch/cnn', sweep_device: 'GPU'}).sweep;
  assert.deepEqual(sweepParams(byDevice), {model: 'torch/cnn', top: '10', group_by: 'name'});
  assert.equal(stateFromParams({sweep_series_by: 'batch_size'}).sweep.series_by, 'device');
});

test('the sweep export is asked for the fits table as it is shown', () => {
  const sweep = stateFromParams({model: 'torch/cnn', sweep_top: '5'}).sweep;
  assert.deepEqual(sweepCsvParams(sweep, {sort: 'r2', order: 'asc', op_contains: 'conv'}),
                   {model: 'torch/cnn', top: '5', group_by: 'name', sort: 'r2', order: 'asc', op_contains: 'conv'});
  assert.equal('op_contains' in sweepCsvParams(sweep, {sort: 'share', order: 'desc', op_contains: ''}), false);
});
