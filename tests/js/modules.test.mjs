// The Modules view's tree rules, on nodes shaped as the modules route answers them (no
// browser: the drawing itself is checked in tests/test_tab_modules_tree.py).

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {pairParams, stateFromParams, stateParams} from '../../frontend/state.js';
import {allBranches, captionText, filterKeeps, initiallyOpen, moduleTree, visibleRows}
  from '../../frontend/views/modules.js';

const node = (id, parent, kind, depth, extra = {}) => ({
  id, parent, name: id === '' ? '(whole model)' : id.split('/').pop(), kind, depth, baseline_us: 10, target_us: 5,
  baseline_share: 0.5, target_share: 0.25, speedup: 2, status: 'matched', ...extra,
});
// depth first from the root, parents before children, as the route orders them
const NODES = [
  node('', null, 'module', 0),
  node('Net_0', '', 'module', 1),
  node('Net_0/Conv2d_0', 'Net_0', 'module', 2),
  node('Net_0/Conv2d_0/aten::conv2d', 'Net_0/Conv2d_0', 'op', 3),
  node('Net_0/Linear_0', 'Net_0', 'module', 2),
  node('Net_0/Linear_0/aten::linear', 'Net_0/Linear_0', 'op', 3),
  node('Net_0/Empty_0', 'Net_0', 'module', 2),
  node('(outside modules)', '', 'module', 1),
  node('(outside modules)/aten::empty', '(outside modules)', 'op', 2, {target_us: null, status: 'baseline_only'}),
];
const ids = (rows) => rows.map((row) => row.node.id);

test('at first the root and the depth-1 modules are open, so depth 2 shows and nothing under it', () => {
  const tree = moduleTree(NODES);
  assert.equal(tree.root.id, '');
  const open = initiallyOpen(tree);
  assert.deepEqual([...open].sort(), ['', 'Net_0']); // the ops outside modules wait for a click
  open.add('(outside modules)');
  const rows = visibleRows(tree, open);
  assert.deepEqual(ids(rows), ['', 'Net_0', 'Net_0/Conv2d_0', 'Net_0/Linear_0', 'Net_0/Empty_0', '(outside modules)',
                               '(outside modules)/aten::empty']);
  const byId = Object.fromEntries(rows.map((row) => [row.node.id, row]));
  assert.deepEqual([byId['Net_0/Conv2d_0'].branch, byId['Net_0/Conv2d_0'].open], [true, false]);
  assert.equal(byId['Net_0/Empty_0'].branch, false); // a module without children has nothing to open
  assert.equal(byId['(outside modules)/aten::empty'].branch, false); // ops are leaves
});

test('opening a module shows its ops; closing an ancestor hides its whole subtree', () => {
  const tree = moduleTree(NODES);
  const open = initiallyOpen(tree);
  open.add('Net_0/Conv2d_0');
  assert.ok(ids(visibleRows(tree, open)).includes('Net_0/Conv2d_0/aten::conv2d'));
  open.delete('Net_0');
  assert.deepEqual(ids(visibleRows(tree, open)), ['', 'Net_0', '(outside modules)']);
  assert.deepEqual(ids(visibleRows(tree, new Set())), ['']);
  assert.equal(visibleRows(tree, allBranches(tree)).length, NODES.length);
});

test('a filter keeps the nodes whose name holds it, any case, and their ancestors', () => {
  const tree = moduleTree(NODES);
  const kept = filterKeeps(tree, ' LINEAR ');
  const rows = visibleRows(tree, new Set(), kept);
  assert.deepEqual(ids(rows), ['', 'Net_0', 'Net_0/Linear_0', 'Net_0/Linear_0/aten::linear']);
  assert.ok(rows.slice(0, 3).every((row) => row.branch && row.open));
  assert.equal(filterKeeps(tree, '  '), null);
  assert.deepEqual(visibleRows(tree, new Set(), filterKeeps(tree, 'nothing such')), []);
});

test('the caption says where modules come from and whether times are per step', () => {
  const document = {baseline: 'a', target: 'b', source: 'name scopes', per_step: false, nodes: [], notes: []};
  assert.match(captionText(document), /modules from name scopes; times and bytes allocated in all \(not per step/);
  assert.match(captionText({...document, per_step: true}), /times and bytes allocated per profiled step/);
});

test('the Modules page is kept in the link; its route takes the selection\'s runs', () => {
  const state = stateFromParams({view: 'modules', baseline: 'cpu', target: 'gpu'});
  assert.equal(state.page, 'modules');
  assert.equal(stateParams(state).view, 'modules');
  assert.deepEqual(pairParams(state.selection), {baseline: 'cpu', target: 'gpu'});
  assert.equal(pairParams(stateFromParams({view: 'modules'}).selection), null);
});
