// The Op Compare tab. TensorBoard loads this module in the plugin's iframe (base URL
// /data/plugin/op_compare/) and calls render(). No build step: plain ES modules.
//
// The layers: state.js holds the tab's state and its URL hash, api.js the plugin's
// routes, view.js the row rule the server shares; views/ draws them. This entry puts the
// two views, "Compare runs" and "Batch sweep", under one tab and keeps the hash in step.

import {addStylesheet, h} from './dom.js';
import {keepStateInHash, readHash, writeHash} from './state.js';
import {followTheme} from './theme.js';
import {CompareView} from './views/compare.js';
import {SweepView} from './views/sweep.js';

const PAGES = [['compare', 'Compare runs'], ['sweep', 'Batch sweep']];

/** TensorBoard calls this once the plugin's frame has loaded the module. */
export async function render() {
  addStylesheet('style.css');
  const state = readHash();
  const syncHash = () => writeHash(state);
  keepStateInHash(state);
  const compare = new CompareView({state, onStateChange: syncHash});
  const sweep = new SweepView({state: state.sweep, onStateChange: syncHash});
  // Before the page is built, so it never shows in the wrong theme.
  followTheme(() => {
    compare.redrawCharts();
    sweep.redraw();
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
    syncHash();
    if (page === 'sweep') sweep.show();
  }

  sweep.element.hidden = true;
  document.body.replaceChildren(h('div', {id: 'op-compare'},
    h('div', {class: 'oc-page'}, h('nav', {class: 'oc-page-tabs', role: 'tablist'}, pageButtons), compare.element,
      sweep.element)));
  if (state.page === 'sweep') showPage('sweep');
  if (!await compare.start()) return;
  showPage(state.page);
  await compare.showComparison();
}
