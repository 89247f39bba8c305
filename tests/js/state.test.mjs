// The tab's state in a link: what is read is written back the same, defaults left out.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {stateFromParams, stateParams, sweepCsvParams} from '../../frontend/state.js';

test('a link with every parameter is written back as it was read', () => {
  const link = {baseline: 'tf1/mlp_cpu', target: 'tf1/mlp_gpu', group_by: 'type', baseline_session: '2026_01_05',
                target_session: '2026_01_06', q: 'conv', status: 'matched,target_only', side: 'device',
                min_us: '1000', sort: 'speedup', order: 'asc', top: '15', view: 'sweep', model: 'torch/cnn',
                sweep_top: '5', sweep_group_by: 'type'};
  assert.deepEqual(stateParams(stateFromParams(link)), link);
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
                                sort: null, order: 'desc', top: null});
  assert.equal(state.selection.group_by, 'name');
  assert.equal(state.sweep.top, 10);
});

test('a link asking to plot more ops than the sweep route takes plots the most it takes', () => {
  assert.equal(stateFromParams({model: 'torch/cnn', sweep_top: '500'}).sweep.top, 50);
});

test('the sweep export is asked for the fits table as it is shown', () => {
  const sweep = stateFromParams({model: 'torch/cnn', sweep_top: '5'}).sweep;
  assert.deepEqual(sweepCsvParams(sweep, {sort: 'r2', order: 'asc', op_contains: 'conv'}),
                   {model: 'torch/cnn', top: '5', group_by: 'name', sort: 'r2', order: 'asc', op_contains: 'conv'});
  assert.equal('op_contains' in sweepCsvParams(sweep, {sort: 'share', order: 'desc', op_contains: ''}), false);
});
