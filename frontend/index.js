// The Op Compare tab. TensorBoard loads this module in the plugin's iframe (base URL
// /data/plugin/op_compare/) and calls render(). No build step: plain ES modules.
//
// The layers: state.js holds the tab's state and its URL hash, api.js the plugin's
// routes, view.js the row rule the server shares; views/ draws them. This entry puts the
// pages of PAGES under one tab, one shown at a time, and keeps the hash in step.

import {addStylesheet, h} from './dom.js';
import {keepStateInHash, readHash, writeHash} from './state.js';
import {followTheme} from './theme.js';
import {CompareView} from './views/compare.js';
import {MatrixView} from './views/matrix.js';
import {MemoryView} from './views/memory.js';
import {LayersView} from './views/layers.js';
import {ModulesView} from './views/modules.js';
import {RooflineView} from './views/roofline.js';
import {SweepView} from './views/sweep.js';
import {TrendView, modelRuns} from './views/trend.js';

/** @typedef {import('./state.js').TabState} TabState */

/**
 * What a page's view is built with: its part of the tab's state, and the other pages it
 * leads to or reads from.
 * @typedef {Object} PageContext
 * @property {TabState} state changed in place by the views, then written to the hash
 * @property {() => void} onStateChange writes the state to the hash
 * @property {Object<string, {element: HTMLElement}>} views the views built so far, by page
 *   name (Compare's first: the others read its runs)
 * @property {() => Promise<boolean>|null} ready settles once the runs are listed: whether
 *   there are runs to compare; null until the listing is asked for
 * @property {(name: string) => void} showPage
 */

/**
 * A page of the tab.
 * @typedef {Object} Page
 * @property {string} name in the hash (TabState.page)
 * @property {string} label its tab's
 * @property {(context: PageContext) => {element: HTMLElement}} create builds its view
 * @property {(view: *) => *} show runs each time the page is shown: the view loads what it
 *   shows then, not before (Compare loads at start-up: nothing)
 * @property {(view: *) => void} [redraw] draws its plots again in the new theme
 */

/** @type {Page[]} the pages, in their tabs' order */
const PAGES = [
  {name: 'compare', label: 'Compare runs', show: () => {}, redraw: (view) => view.redrawCharts(),
   create: ({state, onStateChange}) => new CompareView({state, onStateChange})},
  {name: 'sweep', label: 'Batch sweep', show: (view) => view.show(), redraw: (view) => view.redraw(),
   create: ({state, onStateChange}) => new SweepView({state: state.sweep, onStateChange})},
  // The trend's runs, unless typed: the comparison's model's, from the listing the tab has.
  {name: 'trend', label: 'Trend', show: (view) => view.show(), redraw: (view) => view.redraw(),
   create: ({state, onStateChange, views, ready}) => new TrendView({
     state: state.trend, onStateChange,
     defaultRuns: async () => ((await ready()) ?
       modelRuns(views.compare.listing, views.compare.selection.baseline) : null)})},
  // A matrix cell opens the comparison of its run with its row's reference run.
  {name: 'matrix', label: 'Matrix', show: (view) => view.show(),
   create: ({state, onStateChange, views, ready, showPage}) => new MatrixView({
     state: state.matrix, onStateChange,
     onOpenCompare: async ({baseline, target}) => {
       if (!await ready()) return;
       views.compare.setSelection({baseline, target, baseline_session: null, target_session: null});
       showPage('compare');
     }})},
  // The module trees of the runs the Compare page compares, once it knows the runs.
  {name: 'modules', label: 'Modules', show: (view) => view.show(),
   create: ({state, ready, showPage}) => new ModulesView({selection: state.selection, ready,
                                                          onOpenCompare: () => showPage('compare')})},
  // The memory of the same runs (and sessions): peaks, memory over time, each op's allocations.
  {name: 'memory', label: 'Memory', show: (view) => view.show(), redraw: (view) => view.redraw(),
   create: ({state, onStateChange, ready, showPage}) => new MemoryView({
     selection: state.selection, state: state.memory, onStateChange, ready,
     onOpenCompare: () => showPage('compare')})},
  // The same runs' ops on their devices' rooflines: why an op sped up.
  {name: 'roofline', label: 'Roofline', show: (view) => view.show(), redraw: (view) => view.redraw(),
   create: ({state, ready, showPage}) => new RooflineView({selection: state.selection, ready,
                                                           onOpenCompare: () => showPage('compare')})},
  // The layers of the same runs (and sessions), with its rows table's sort and filter in the link.
  {name: 'layers', label: 'Layers', show: (view) => view.show(),
   create: ({state, onStateChange, ready, showPage}) => new LayersView({
     selection: state.selection, state: state.layers, onStateChange, ready,
     onOpenCompare: () => showPage('compare')})},
];

/** TensorBoard calls this once the plugin's frame has loaded the module. */
export async function render() {
  addStylesheet('style.css');
  const state = readHash();
  // a link to a page this tab has not (a newer or an older version's): the first page
  if (!PAGES.some((page) => page.name === state.page)) state.page = PAGES[0].name;
  const syncHash = () => writeHash(state);
  keepStateInHash(state);
  let started = null; // whether the runs could be listed (Compare's start), once asked
  const views = {};
  const context = {state, onStateChange: syncHash, views, ready: () => started, showPage};
  for (const page of PAGES) views[page.name] = page.create(context);
  // Before the page is built, so it never shows in the wrong theme.
  followTheme(() => {
    for (const page of PAGES) if (page.redraw) page.redraw(views[page.name]);
  });

  const pageButtons = PAGES.map(({name, label}) =>
    h('button', {class: 'oc-page-tab', type: 'button', 'data-page': name, role: 'tab', onclick: () => showPage(name)},
      label));
  /** @param {string} name */
  function showPage(name) {
    state.page = name;
    for (const [i, page] of PAGES.entries()) {
      const shown = page.name === name;
      pageButtons[i].classList.toggle('oc-active', shown);
      pageButtons[i].setAttribute('aria-selected', String(shown));
      views[page.name].element.hidden = !shown;
    }
    syncHash();
    const page = PAGES.find((entry) => entry.name === name);
    if (page) page.show(views[name]);
  }

  // Compare shows while the runs are listed, unless the link opens another page.
  for (const page of PAGES) views[page.name].element.hidden = page !== PAGES[0];
  document.body.replaceChildren(h('div', {id: 'op-compare'},
    h('div', {class: 'oc-page'}, h('nav', {class: 'oc-page-tabs', role: 'tablist'}, pageButtons),
      PAGES.map((page) => views[page.name].element))));
  started = views.compare.start();
  if (state.page !== 'compare') showPage(state.page);
  if (!await started) return;
  showPage(state.page);
  await views.compare.showComparison();
}
