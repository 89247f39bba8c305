// The Op Compare tab. TensorBoard loads this module in the plugin's iframe (base URL
// /data/plugin/op_compare/) and calls render(). No build step: plain ES modules.
//
// The layers: state.js holds the tab's state and its URL hash, api.js the plugin's
// routes, view.js the row rule the server shares; views/ draws them. This entry puts the
// views, "Compare runs", "Batch sweep", "Trend", "Matrix", "Modules", "Memory" and "Layers", under one tab and
// keeps the hash in step.

import {addStylesheet, h} from './dom.js';
import {keepStateInHash, readHash, writeHash} from './state.js';
import {followTheme} from './theme.js';
import {CompareView} from './views/compare.js';
import {MatrixView} from './views/matrix.js';
import {MemoryView} from './views/memory.js';
import {LayersView} from './views/layers.js';
import {ModulesView} from './views/modules.js';
import {SweepView} from './views/sweep.js';
import {TrendView, modelRuns} from './views/trend.js';

const PAGES = [['compare', 'Compare runs'], ['sweep', 'Batch sweep'], ['trend', 'Trend'], ['matrix', 'Matrix'],
               ['modules', 'Modules'], ['memory', 'Memory'], ['layers', 'Layers']];

/** TensorBoard calls this once the plugin's frame has loaded the module. */
export async function render() {
  addStylesheet('style.css');
  const state = readHash();
  const syncHash = () => writeHash(state);
  keepStateInHash(state);
  const compare = new CompareView({state, onStateChange: syncHash});
  const sweep = new SweepView({state: state.sweep, onStateChange: syncHash});
  let started = null; // whether the runs could be listed (compare.start), once asked
  // The trend's runs, unless typed: the comparison's model's, from the listing the tab has.
  const trend = new TrendView({state: state.trend, onStateChange: syncHash,
                               defaultRuns: async () => ((await started) ?
                                 modelRuns(compare.listing, compare.selection.baseline) : null)});
  // A matrix cell opens the comparison of its run with its row's reference run.
  const matrix = new MatrixView({state: state.matrix, onStateChange: syncHash,
                                 onOpenCompare: async ({baseline, target}) => {
                                   if (!await started) return;
                                   compare.setSelection({baseline, target, baseline_session: null,
                                                         target_session: null});
                                   showPage('compare');
                                 }});
  // The module trees of the runs the Compare page compares, once it knows the runs.
  const modules = new ModulesView({selection: state.selection, ready: () => started,
                                   onOpenCompare: () => showPage('compare')});
  // The layers of the same runs (and sessions), with its rows table's sort and filter in the link.
  const layers = new LayersView({selection: state.selection, state: state.layers, onStateChange: syncHash,
                                 ready: () => started, onOpenCompare: () => showPage('compare')});
  // The memory of the same runs (and sessions): peaks, memory over time, each op's allocations.
  const memory = new MemoryView({selection: state.selection, state: state.memory, onStateChange: syncHash,
                                 ready: () => started, onOpenCompare: () => showPage('compare')});
  // Before the page is built, so it never shows in the wrong theme.
  followTheme(() => {
    compare.redrawCharts();
    sweep.redraw();
    trend.redraw();
    memory.redraw();
  });

  const pageButtons = PAGES.map(([page, label]) =>
    h('button', {class: 'oc-page-tab', type: 'button', 'data-page': page, role: 'tab', onclick: () => showPage(page)},
      label));
  function showPage(page) {
    state.page = page;
    for (const button of pageButtons) {
      button.classList.toggle('oc-active', button.dataset.page === page);
      button.setAttribute('aria-selected', String(button.dataset.page === page));
    }
    compare.element.hidden = page !== 'compare';
    sweep.element.hidden = page !== 'sweep';
    trend.element.hidden = page !== 'trend';
    matrix.element.hidden = page !== 'matrix';
    modules.element.hidden = page !== 'modules';
    layers.element.hidden = page !== 'layers';
    memory.element.hidden = page !== 'memory';
    syncHash();
    if (page === 'sweep') sweep.show();
    if (page === 'trend') trend.show();
    if (page === 'matrix') matrix.show();
    if (page === 'modules') modules.show();
    if (page === 'layers') layers.show();
    if (page === 'memory') memory.show();
  }

  sweep.element.hidden = true;
  trend.element.hidden = true;
  matrix.element.hidden = true;
  modules.element.hidden = true;
  layers.element.hidden = true;
  memory.element.hidden = true;
  document.body.replaceChildren(h('div', {id: 'op-compare'},
    h('div', {class: 'oc-page'}, h('nav', {class: 'oc-page-tabs', role: 'tablist'}, pageButtons), compare.element,
      sweep.element, trend.element, matrix.element, modules.element, layers.element,
      memory.element)));
  started = compare.start();
  if (state.page !== 'compare') showPage(state.page);
  if (!await started) return;
  showPage(state.page);
  await compare.showComparison();
}
