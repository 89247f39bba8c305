// The "Layers" view: how much of a step each layer of the stack takes in the runs the
// Compare page compares, side by side: the application (user ranges), the framework
// (ops), the runtime (CUDA/HIP runtime and driver calls) and the device (kernels,
// memcpys, memsets); then the application's ranges and the runtime's calls as rows,
// compared like ops (wall time per call), grouped by layer, sortable and filterable. The
// layers route computes it all; this draws its document as it comes.

import {fetchLayers, layersCsvUrl} from '../api.js';
import {h, setText} from '../dom.js';
import {formatCount, formatShare, formatSpeedup, formatStatus, formatTime, headlineText,
  speedupColor} from '../format.js';
import {LAYERS, ROW_LAYERS} from '../contract.js';
import {sortMissingLast} from '../view.js';
import {poolNoteSlot, showPairPage} from './latest.js';
import {PageSkeleton} from './skeleton.js';
import {nextSort, sortIndicator} from './sorting.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').LayersDocument} LayersDocument */
/** @typedef {import('../contract.js').LayerTotal} LayerTotal */
/** @typedef {import('../contract.js').LayerRow} LayerRow */
/** @typedef {import('../state.js').Selection} Selection */
/** @typedef {import('../state.js').LayersState} LayersState */
/** @typedef {import('../api.js').ApiError} ApiError */

// The layers, top of the stack first (the summary always shows the four), and those that
// have rows, in the order the rows table groups them: as the server names them.
export {LAYERS, ROW_LAYERS};

const LAYER_LABELS = {application: 'Application', framework: 'Framework', runtime: 'Runtime', device: 'Device'};
const LAYER_DETAILS = {
  application: 'user ranges (record_function, TF Trace, app_stats)',
  framework: 'ops',
  runtime: 'CUDA/HIP runtime and driver calls',
  device: 'kernels, memcpys, memsets',
};
const GROUP_LABELS = {application: 'Application ranges', runtime: 'Runtime calls'};
const BASIS_WORDS = {self: 'self', wall: 'wall', kernel: 'kernel'};
const BASIS_TITLES = {
  self: 'self time: host time in the layer\'s own work, nested work of other layers left out',
  wall: 'wall time: ranges with wall time only, the ops inside them included',
  kernel: 'kernel time: summed device time, which overlaps the host\'s',
};
// A DOM this size stays quick to build on each keystroke in the filter.
const MAX_SHOWN = 2000;

/**
 * The rows table's columns; `wall` columns are per step or in all, as the document says.
 * @type {{name: string, label: string, title?: string, text?: boolean, wall?: boolean}[]}
 */
export const ROW_COLUMNS = [
  {name: 'name', label: 'Name', text: true, title: 'the range\'s or call\'s name'},
  {name: 'kind', label: 'Kind', text: true, title: 'what recorded it: a trace category, or app_stats'},
  {name: 'baseline_calls', label: 'Baseline calls', title: 'times it ran in the baseline (all profiled steps)'},
  {name: 'target_calls', label: 'Target calls', title: 'times it ran in the target (all profiled steps)'},
  {name: 'baseline_wall_us', label: 'Baseline wall', wall: true, title: 'its summed wall time on the baseline'},
  {name: 'target_wall_us', label: 'Target wall', wall: true, title: 'its summed wall time on the target'},
  {name: 'baseline_mean_us', label: 'Baseline mean', title: 'wall time per call on the baseline'},
  {name: 'target_mean_us', label: 'Target mean', title: 'wall time per call on the target'},
  {name: 'speedup', label: 'Speedup', title: 'baseline mean per call / target mean per call'},
  {name: 'status', label: 'Status', text: true, title: 'in both runs, or in one only'},
];

/**
 * The four layers in their order, each with the document's total, or null where neither
 * run records the layer (the route leaves it out).
 * @param {LayersDocument} document
 * @returns {{layer: string, total: LayerTotal|null}[]}
 */
export function layerSummary(document) {
  const byLayer = new Map(document.layers.map((total) => [total.layer, total]));
  return LAYERS.map((layer) => ({layer, total: byLayer.get(layer) || null}));
}

/**
 * How a layer's time is measured, in short ("self time", "self / wall time"); the
 * route joins the two runs' bases with "/" where they differ.
 * @param {string|null} basis
 */
export function basisText(basis) {
  if (!basis) return 'not recorded';
  return `${basis.split('/').map((part) => BASIS_WORDS[part] || part).join(' / ')} time`;
}

/** What a basis means, for the tooltip. */
export function basisTitle(basis) {
  if (!basis) return 'neither run records this layer';
  return basis.split('/').map((part) => BASIS_TITLES[part] || part).join('; ');
}

/**
 * The rows a filter and sort keep, grouped by layer (application ranges, then runtime
 * calls, then any other layer the route names); empty groups are left out. The filter
 * keeps the rows whose name or kind holds `q` (any case); a sort orders each group by a
 * column, missing values last either way; no sort (or an unknown column) keeps the
 * route's order, the larger first.
 * @param {LayerRow[]} rows
 * @param {{q?: string, sort?: string|null, order?: 'asc'|'desc'}} view
 * @returns {{layer: string, rows: LayerRow[]}[]}
 */
export function layerGroups(rows, {q = '', sort = null, order = 'desc'} = {}) {
  const needle = q.trim().toLowerCase();
  const kept = needle ? rows.filter((row) => row.name.toLowerCase().includes(needle) ||
    row.kind.toLowerCase().includes(needle)) : rows;
  const column = sortColumn(sort);
  const layers = [...ROW_LAYERS, ...new Set(rows.map((row) => row.layer).filter((layer) => !ROW_LAYERS.includes(layer)))];
  return layers.map((layer) => {
    const mine = kept.filter((row) => row.layer === layer);
    return {layer, rows: column ? sortMissingLast(mine, column, order) : mine};
  }).filter((group) => group.rows.length);
}

/** `sort` where it names a rows column, else null (the route's order). */
export function sortColumn(sort) {
  return ROW_COLUMNS.some((column) => column.name === sort) ? sort : null;
}

/** What the caption says of the runs, of what the times are and of the speedups. */
export function captionText(document) {
  const per = document.per_step ? 'per profiled step' :
    'in all (not per step: a run does not know its step count)';
  return `${document.baseline} → ${document.target}: times ${per}; shares of each run's step wall time; ` +
    'speedup = baseline / target (a row\'s: its mean per call).';
}

/** The rows count, as the filter bar says it. */
export function countText(shown, total) {
  const noun = total === 1 ? 'row' : 'rows';
  return shown === total ? `${formatCount(total)} ${noun}` : `${formatCount(shown)} of ${formatCount(total)} ${noun}`;
}

/** @param {ApiError} error */
function layersFailed(error) {
  return messageBox({kind: 'error', title: 'The layers cannot be compared', text: error.message,
                     id: 'oc-layers-message'});
}

function speedupCell(speedup) {
  return h('td', {class: 'oc-num', 'data-layers-column': 'speedup'},
    h('span', {class: 'oc-speedup', style: speedupColor(speedup)}, formatSpeedup(speedup)));
}

/** A share as text, over a bar of it (full past 100%: several host threads at once). */
function shareCell(share, layer, column) {
  const known = share !== null && share !== undefined;
  const over = known && share > 1;
  return h('td', {class: 'oc-num oc-layers-share', 'data-layers-column': column,
                  title: over ? 'above 100% of the step: several host threads worked at once' : null},
    h('span', {class: `oc-layers-bar${over ? ' oc-layers-bar-over' : ''}`, 'aria-hidden': 'true'},
      known ? h('span', {class: `oc-layers-fill oc-layer-${layer}`,
                         style: {width: `${Math.max(0, Math.min(1, share)) * 100}%`}}) : null),
    h('span', {class: 'oc-layers-share-text'}, formatShare(share)),
    // the reason in the cell itself, not only in its tooltip: a share past 100% reads as an error otherwise
    over ? h('span', {class: 'oc-layers-over-reason'}, 'threads side by side') : null);
}

export class LayersView {
  /**
   * @param {{selection: Selection, state: LayersState, onStateChange: () => void,
   *          ready: () => Promise<boolean|null>, onOpenCompare: () => void}} options
   *   `selection` is the Compare page's (read each time the view is shown); `state` the
   *   rows table's sort and filter, kept in the link (`onStateChange` after each change);
   *   `ready` settles once the runs are known (false: none); `onOpenCompare` shows the
   *   Compare page
   */
  constructor({selection, state, onStateChange, ready, onOpenCompare}) {
    this.selection = selection;
    this.state = state;
    this.onStateChange = onStateChange;
    this.ready = ready;
    this.onOpenCompare = onOpenCompare;
    this.requestId = 0;
    this.loading = null;
    this.shownKey = null;
    /** @type {LayersDocument|null} */
    this.document = null;
    this.element = h('section', {class: 'oc-layers-view', id: 'oc-layers'});
    this.build();
  }

  build() {
    this.caption = h('div', {class: 'oc-layers-caption', id: 'oc-layers-caption'});
    this.notes = h('div', {class: 'oc-notices', id: 'oc-layers-notes'});
    this.headline = h('div', {class: 'oc-view-headline', id: 'oc-layers-headline'});
    this.summaryTitle = h('span', {class: 'oc-card-title'});
    this.summaryRows = h('tbody');
    const numeric = (text, title, column) => h('th', {class: 'oc-num', scope: 'col', title, 'data-layers-column': column},
      text);
    this.summary = h('table', {class: 'oc-table oc-layers-summary', id: 'oc-layers-summary'},
      h('colgroup', {}, h('col', {class: 'oc-layers-layer-column'}),
        ['time', 'share', 'time', 'share', 'speedup'].map((kind) => h('col', {class: `oc-layers-${kind}-column`}))),
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Layer'),
        numeric('Baseline', 'the layer\'s time on the baseline', 'baseline_us'),
        numeric('Baseline share', 'of the baseline\'s step wall time', 'baseline_share'),
        numeric('Target', 'the layer\'s time on the target', 'target_us'),
        numeric('Target share', 'of the target\'s step wall time', 'target_share'),
        numeric('Speedup', 'baseline time / target time', 'speedup'))),
      this.summaryRows);
    this.summaryCard = h('div', {class: 'oc-card oc-layers-summary-card'},
      h('div', {class: 'oc-layers-card-head'}, this.summaryTitle),
      h('div', {class: 'oc-layers-summary-scroll'}, this.summary),
      h('div', {class: 'oc-small-print oc-layers-legend'},
        'Host layers are self time: a range or call leaves out the ops and calls inside it, so application, ',
        'framework and runtime add up to the host threads\' busy time. Device time is kernel time, which ',
        'overlaps the host\'s. Wall time (TF Trace ranges, app_stats) includes the ops inside the ranges. – : not recorded.'));

    this.filterInput = h('input', {class: 'oc-input oc-filter', id: 'oc-layers-filter', type: 'search',
                                   placeholder: 'Filter ranges and calls', 'aria-label': 'filter rows',
                                   title: 'shows the rows whose name or kind holds this (any case)',
                                   value: this.state.q, oninput: () => this.setView({q: this.filterInput.value})});
    this.count = h('span', {class: 'oc-count', id: 'oc-layers-count'});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-layers-export', download: '', href: '#',
                              title: 'every row of both runs, as the route lists them'}, 'Download CSV');
    this.head = h('tr');
    this.rows = h('tbody');
    this.table = h('table', {class: 'oc-table oc-layers-rows', id: 'oc-layers-table'},
      h('colgroup', {}, ROW_COLUMNS.map((column) => h('col', {class: `oc-layers-col-${column.name}`}))),
      h('thead', {}, this.head), this.rows);
    this.poolSlot = poolNoteSlot();
    this.body = h('div', {class: 'oc-layers-body'}, this.headline, this.caption, this.poolSlot, this.notes, this.summaryCard,
      h('div', {class: 'oc-filters oc-layers-filters'}, this.filterInput, h('span', {class: 'oc-spacer-flex'}),
        this.count, this.exportLink),
      h('div', {class: 'oc-table-scroll oc-layers-scroll'}, this.table));
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink, loadingText: 'Reading both runs…',
                                      frameClass: 'oc-layers-frame'});
    this.element.replaceChildren(this.skeleton.message, this.skeleton.element);
  }

  /** Each time the view is opened: the layers of the Compare page's runs, unless on screen. */
  async show() {
    return showPairPage(this, {
      id: 'oc-layers', fetch: fetchLayers, failed: layersFailed, clear: () => { this.document = null; },
      text: 'This page compares the layers (application, framework, runtime, device) of the runs chosen on the ' +
        'Compare runs page.'});
  }


  /** @param {LayersDocument} document */
  draw(document, params) {
    this.document = document;
    this.exportLink.href = layersCsvUrl(params);
    setText(this.headline, headlineText(document.headline));
    setText(this.caption, captionText(document));
    this.notes.replaceChildren(...document.notes.map((note) =>
      h('div', {class: 'oc-panel oc-panel-note oc-layers-note'}, note)));
    this.summaryTitle.textContent = document.per_step ? 'Time per layer, per profiled step' :
      'Time per layer, in all';
    this.summaryRows.replaceChildren(...layerSummary(document).map(({layer, total}) => this.summaryRow(layer, total)));
    this.drawRows();
  }

  /**
   * @param {string} layer
   * @param {LayerTotal|null} total null: neither run records the layer
   */
  summaryRow(layer, total) {
    const value = (name) => (total ? total[name] : null);
    const time = (name) => h('td', {class: 'oc-num oc-layers-time', 'data-layers-column': name}, formatTime(value(name)));
    return h('tr', {class: `oc-row oc-layers-layer${total ? '' : ' oc-layers-unrecorded'}`, 'data-layer': layer,
                    'data-recorded': String(Boolean(total))},
      h('td', {class: 'oc-layers-name', title: `${LAYER_DETAILS[layer] || layer}; ${basisTitle(value('basis'))}`},
        h('span', {class: `oc-swatch oc-layer-${layer}`}),
        h('span', {class: 'oc-layers-label'}, LAYER_LABELS[layer] || layer),
        h('span', {class: 'oc-layers-basis', 'data-basis': value('basis') || ''}, basisText(value('basis')))),
      time('baseline_us'), shareCell(value('baseline_share'), layer, 'baseline_share'),
      time('target_us'), shareCell(value('target_share'), layer, 'target_share'),
      speedupCell(value('speedup')));
  }

  /** @param {Partial<LayersState>} changes */
  setView(changes) {
    Object.assign(this.state, changes);
    this.drawRows();
    this.onStateChange();
  }

  sortBy(column) {
    const text = Boolean(ROW_COLUMNS.find((c) => c.name === column).text);
    const {order} = nextSort({column: sortColumn(this.state.sort), order: this.state.order}, column, text);
    this.setView({sort: column, order});
  }

  drawHead() {
    const sorted = sortColumn(this.state.sort);
    const wall = this.document && !this.document.per_step ? 'in all' : 'per step';
    this.head.replaceChildren(...ROW_COLUMNS.map((column) => {
      const {ariaSort, mark} = sortIndicator(column.name === sorted, this.state.order);
      return h('th', {scope: 'col', class: `${column.text ? '' : 'oc-num'}${column.name === sorted ? ' oc-sorted' : ''}`,
                      'data-layers-column': column.name, 'aria-sort': ariaSort,
                      title: column.wall ? `${column.title}, ${wall}` : column.title,
                      onclick: () => this.sortBy(column.name)},
        column.wall ? `${column.label} ${wall === 'per step' ? '/ step' : '(all)'}` : column.label,
        h('span', {class: 'oc-sort-mark'}, mark));
    }));
  }

  drawRows() {
    if (!this.document) return;
    this.drawHead();
    const all = this.document.rows;
    const groups = layerGroups(all, this.state);
    const shown = groups.reduce((sum, group) => sum + group.rows.length, 0);
    this.count.textContent = countText(shown, all.length);
    if (!shown) {
      this.rows.replaceChildren(h('tr', {}, h('td', {class: 'oc-no-rows', colspan: ROW_COLUMNS.length},
        all.length ? 'No range or call has that name or kind' :
          'No application ranges or runtime calls in these runs')));
      return;
    }
    let budget = MAX_SHOWN;
    const built = [];
    for (const group of groups) {
      const mine = all.filter((row) => row.layer === group.layer).length;
      built.push(h('tr', {class: 'oc-layers-group', 'data-layer': group.layer},
        h('td', {colspan: ROW_COLUMNS.length},
          h('span', {class: `oc-swatch oc-layer-${group.layer}`}),
          h('span', {class: 'oc-layers-group-label'}, GROUP_LABELS[group.layer] || LAYER_LABELS[group.layer] ||
            group.layer),
          h('span', {class: 'oc-layers-group-count'}, countText(group.rows.length, mine)))));
      for (const row of group.rows.slice(0, budget)) built.push(this.row(row));
      budget = Math.max(0, budget - group.rows.length);
    }
    this.rows.replaceChildren(...built);
  }

  /** @param {LayerRow} row */
  row(row) {
    const cell = (name, text) => h('td', {class: 'oc-num', 'data-layers-column': name}, text);
    return h('tr', {class: 'oc-row oc-layers-row', 'data-layer': row.layer, 'data-name': row.name,
                    'data-status': row.status},
      h('td', {class: 'oc-text', 'data-layers-column': 'name', title: row.name}, row.name),
      h('td', {class: 'oc-layers-kind', 'data-layers-column': 'kind', title: row.kind}, row.kind),
      cell('baseline_calls', formatCount(row.baseline_calls)), cell('target_calls', formatCount(row.target_calls)),
      cell('baseline_wall_us', formatTime(row.baseline_wall_us)), cell('target_wall_us', formatTime(row.target_wall_us)),
      cell('baseline_mean_us', formatTime(row.baseline_mean_us)), cell('target_mean_us', formatTime(row.target_mean_us)),
      speedupCell(row.speedup),
      h('td', {'data-layers-column': 'status'}, h('span', {class: `oc-status oc-status-${row.status}`},
        formatStatus(row.status))));
  }
}
