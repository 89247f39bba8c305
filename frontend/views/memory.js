// The "Memory" view: the memory of the runs the Compare page compares, side by side. Each
// run's peak per device, a memory-over-time plot per device with both runs on it, and the
// ops that allocated or freed memory as a sortable, filterable table. The memory route
// computes it all; this draws its document as it comes. Runs that record no memory get a
// message saying how to record it, never an empty page.

import {fetchMemory, loadPlotly, memoryCsvUrl} from '../api.js';
import {h, setText} from '../dom.js';
import {formatBytes, formatCount, formatSpeedup, formatStatus, plotlyText, shortenNames} from '../format.js';
import {themedLayout} from '../theme.js';
import {sortMissingLast} from '../view.js';
import {openCompareButton, poolNoteSlot, showPairPage} from './latest.js';
import {SIDES, SIDE_COLOURS, SIDE_LABELS, sideSwatch} from './sides.js';
import {PageSkeleton} from './skeleton.js';
import {nextSort, sortIndicator} from './sorting.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').MemoryDocument} MemoryDocument */
/** @typedef {import('../contract.js').MemoryRun} MemoryRun */
/** @typedef {import('../contract.js').MemorySeries} MemorySeries */
/** @typedef {import('../contract.js').MemoryRow} MemoryRow */
/** @typedef {import('../state.js').Selection} Selection */
/** @typedef {import('../state.js').MemoryState} MemoryState */
/** @typedef {import('../api.js').ApiError} ApiError */

/**
 * One plot: a device and the series of each run that holds memory on it.
 * @typedef {Object} DevicePlot
 * @property {string} device
 * @property {MemorySeries[]} series baseline first
 */

// A DOM this size stays quick to build on each keystroke in the filter.
const MAX_SHOWN = 2000;
const LEGEND_LENGTH = 48;
const PLOT_HEIGHT = 300;
// Units of a plot's axis: the largest its peak reaches, so ticks read 0-70 (MiB), not 0-7e7.
const UNITS = [['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10], ['B', 1]];

/**
 * The op table's columns.
 * @type {{name: string, label: string, title: string, text?: boolean}[]}
 */
export const MEMORY_COLUMNS = [
  {name: 'key', label: 'Op', text: true, title: 'op name'},
  {name: 'baseline_alloc_bytes', label: 'Baseline allocated',
   title: 'bytes the op itself allocated over the baseline\'s profile (not the ops it called)'},
  {name: 'target_alloc_bytes', label: 'Target allocated',
   title: 'bytes the op itself allocated over the target\'s profile (not the ops it called)'},
  {name: 'baseline_alloc_bytes_per_execution', label: 'Baseline / call', title: 'allocated per call, baseline'},
  {name: 'target_alloc_bytes_per_execution', label: 'Target / call', title: 'allocated per call, target'},
  {name: 'baseline_net_bytes', label: 'Baseline net',
   title: 'allocated minus freed by the op itself, baseline (– where frees name no op, as in TensorFlow)'},
  {name: 'target_net_bytes', label: 'Target net',
   title: 'allocated minus freed by the op itself, target (– where frees name no op, as in TensorFlow)'},
  {name: 'ratio', label: 'Ratio', title: 'target / baseline, allocated per call (> 1: the target allocates more)'},
  {name: 'status', label: 'Status', text: true, title: 'in both runs, or in one only'},
];

/** `sort` where it names a column of the table, else null (the route's order). */
export function sortColumn(sort) {
  return MEMORY_COLUMNS.some((column) => column.name === sort) ? sort : null;
}

/**
 * The rows a filter and sort keep: the ops whose name holds `q` (any case), ordered by a
 * column, missing values last either way; no sort keeps the route's order (the largest
 * allocation first).
 * @param {MemoryRow[]} rows
 * @param {{q?: string, sort?: string|null, order?: 'asc'|'desc'}} view
 * @returns {MemoryRow[]}
 */
export function memoryRows(rows, {q = '', sort = null, order = 'desc'} = {}) {
  const needle = q.trim().toLowerCase();
  const kept = needle ? rows.filter((row) => row.key.toLowerCase().includes(needle)) : rows;
  const column = sortColumn(sort);
  return column ? sortMissingLast(kept, column, order) : kept;
}

/**
 * One plot per device either run holds memory on, in the document's order (the
 * baseline's devices, then the target's others), each with both runs' series there.
 * @param {MemoryDocument} document
 * @returns {DevicePlot[]}
 */
export function devicePlots(document) {
  const plots = new Map();
  for (const series of document.series) {
    if (!plots.has(series.device)) plots.set(series.device, {device: series.device, series: []});
    plots.get(series.device).series.push(series);
  }
  for (const plot of plots.values()) plot.series.sort((a, b) => SIDES.indexOf(a.side) - SIDES.indexOf(b.side));
  return [...plots.values()];
}

/** Whether neither run records memory: the page is a message then. */
export function recordsNoMemory(document) {
  return !document.baseline.recorded && !document.target.recorded;
}

// Peaks further apart than this on one device are not one workload's memory measured
// twice: one run barely uses the device (a GPU run's host memory, 4 B against a CPU run's
// 9.14 MiB), and a ratio such as 0.000000× would read as a result.
const PEAKS_APART = 100;

/**
 * A plot's title: its device and each run's peak there, with the ratio where both have one
 * ("GPU:0 · peak 70.9 MiB → 141 MiB (1.99×)"), or which run barely uses the device.
 * @param {DevicePlot} plot
 */
export function plotTitle(plot) {
  const peaks = Object.fromEntries(plot.series.map((series) => [series.side, series.peak_bytes]));
  const both = SIDES.every((side) => peaks[side] !== undefined);
  const text = SIDES.map((side) => (peaks[side] === undefined ? '–' : formatBytes(peaks[side]))).join(' → ');
  if (!both || !(peaks.baseline > 0) || !(peaks.target > 0)) return `${plot.device} · peak ${text}`;
  const ratio = peaks.target / peaks.baseline;
  if (ratio > PEAKS_APART || ratio < 1 / PEAKS_APART) {
    const light = ratio > 1 ? 'baseline' : 'target';
    return `${plot.device} · peak ${text} (the ${light} barely uses this device: no ratio)`;
  }
  return `${plot.device} · peak ${text} (${formatSpeedup(ratio)})`;
}

/** The axis unit for a plot whose highest value is `peak` bytes. */
export function axisUnit(peak) {
  const [name, scale] = UNITS.find(([, size]) => peak >= size) || UNITS[UNITS.length - 1];
  return {name, scale};
}

/**
 * The plotly figure of one device: each run's memory in use as a step line (memory is
 * held until the next allocation or free), its peak marked, time in ms since each run's
 * first memory sample.
 * @param {DevicePlot} plot
 * @param {MemoryDocument} document
 */
export function memoryFigure(plot, document) {
  const unit = axisUnit(Math.max(...plot.series.map((series) => series.peak_bytes)));
  const names = shortenNames(plot.series.map((series) => document[series.side].run), LEGEND_LENGTH);
  const data = [];
  plot.series.forEach((series, i) => {
    const label = `${SIDE_LABELS[series.side]}: ${names[i]}`;
    const peakAt = series.bytes_in_use.indexOf(series.peak_bytes);
    data.push({
      type: 'scatter', mode: 'lines', name: plotlyText(label), legendgroup: series.side,
      x: series.time_us.map((us) => us / 1000), y: series.bytes_in_use.map((bytes) => bytes / unit.scale),
      line: {color: SIDE_COLOURS[series.side], width: 1.5, shape: 'hv'},
      customdata: series.bytes_in_use.map(formatBytes),
      hovertemplate: `${plotlyText(label)}<br>%{x:.2f} ms · %{customdata}<extra></extra>`,
    });
    data.push({
      type: 'scatter', mode: 'markers', showlegend: false, legendgroup: series.side,
      x: [series.time_us[peakAt] / 1000], y: [series.peak_bytes / unit.scale],
      marker: {color: SIDE_COLOURS[series.side], size: 9, symbol: 'triangle-down'},
      hovertemplate: `${plotlyText(label)}<br>peak ${formatBytes(series.peak_bytes)} at %{x:.2f} ms<extra></extra>`,
    });
  });
  const layout = {
    height: PLOT_HEIGHT, margin: {l: 56, r: 16, t: 8, b: 44},
    xaxis: {title: {text: 'ms since the run\'s first memory record', font: {size: 11}}, zeroline: false},
    yaxis: {title: {text: `${unit.name} in use`, font: {size: 11}}, rangemode: 'tozero'},
    legend: {orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom', font: {size: 11}},
    font: {family: 'Roboto, sans-serif', size: 12},
    hovermode: 'closest',
  };
  return {data, layout};
}

/** What the caption says of the runs and the figures. */
export function captionText(document) {
  return `${document.baseline.run} → ${document.target.run}: peak memory per device; memory in use over time, ` +
    'each run from its first memory record (each point the highest of its stretch of time, so peaks show); the ' +
    'ops that allocated or freed memory, the largest first; ratio = target / baseline, allocated per call.';
}

/** The rows count, as the filter bar says it. */
export function countText(shown, total) {
  const noun = total === 1 ? 'op' : 'ops';
  return shown === total ? `${formatCount(total)} ${noun}` : `${formatCount(shown)} of ${formatCount(total)} ${noun}`;
}

/** "12.8 MiB allocated / step", or in all where the run does not know its steps. */
function allocatedText(run) {
  if (run.allocated_bytes_per_step !== null) return `${formatBytes(run.allocated_bytes_per_step)} allocated / step`;
  if (run.allocated_bytes !== null) return `${formatBytes(run.allocated_bytes)} allocated in all`;
  return 'no allocations per op';
}

function eventsText(run) {
  if (run.memory_events_per_step !== null) {
    return `${formatCount(Math.round(run.memory_events_per_step))} memory events / step`;
  }
  return run.memory_events !== null ? `${formatCount(run.memory_events)} memory events` : null;
}

/** @param {ApiError} error */
function memoryFailed(error) {
  return messageBox({kind: 'error', title: 'The runs\' memory cannot be compared', text: error.message,
                     id: 'oc-memory-message'});
}

export class MemoryView {
  /**
   * @param {{selection: Selection, state: MemoryState, onStateChange: () => void,
   *          ready: () => Promise<boolean|null>, onOpenCompare: () => void}} options
   *   `selection` is the Compare page's (read each time the view is shown); `state` the op
   *   table's sort and filter, kept in the link (`onStateChange` after each change);
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
    /** @type {MemoryDocument|null} */
    this.document = null;
    this.element = h('section', {class: 'oc-memory-view', id: 'oc-memory'});
    this.build();
  }

  build() {
    this.caption = h('div', {class: 'oc-memory-caption', id: 'oc-memory-caption'});
    this.notes = h('div', {class: 'oc-notices', id: 'oc-memory-notes'});
    this.cards = h('div', {class: 'oc-summary oc-memory-cards', id: 'oc-memory-cards'});
    this.plots = h('div', {class: 'oc-charts oc-memory-plots', id: 'oc-memory-plots'});
    this.filterInput = h('input', {class: 'oc-input oc-filter', id: 'oc-memory-filter', type: 'search',
                                   placeholder: 'Filter ops', 'aria-label': 'filter ops',
                                   title: 'shows the ops whose name holds this (any case)',
                                   value: this.state.q, oninput: () => this.setView({q: this.filterInput.value})});
    this.count = h('span', {class: 'oc-count', id: 'oc-memory-count'});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-memory-export', download: '', href: '#',
                              title: 'every op row of both runs, as the route lists them'}, 'Download CSV');
    this.head = h('tr');
    this.rows = h('tbody');
    this.table = h('table', {class: 'oc-table oc-memory-table', id: 'oc-memory-table'},
      h('colgroup', {}, MEMORY_COLUMNS.map((column) => h('col', {class: `oc-memory-col-${column.name}`}))),
      h('thead', {}, this.head), this.rows);
    this.poolSlot = poolNoteSlot();
    this.body = h('div', {class: 'oc-memory-body'}, this.caption, this.poolSlot, this.notes, this.cards, this.plots,
      h('div', {class: 'oc-filters oc-memory-filters'}, this.filterInput, h('span', {class: 'oc-spacer-flex'}),
        this.count, this.exportLink),
      h('div', {class: 'oc-table-scroll oc-memory-scroll'}, this.table));
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink, loadingText: 'Reading both runs…',
                                      frameClass: 'oc-memory-frame'});
    this.element.replaceChildren(this.skeleton.message, this.skeleton.element);
  }

  /** Each time the view is opened: the memory of the Compare page's runs, unless on screen. */
  async show() {
    return showPairPage(this, {
      id: 'oc-memory', fetch: fetchMemory, failed: memoryFailed, clear: () => { this.document = null; },
      text: 'This page compares the memory of the runs chosen on the Compare runs page.'});
  }


  /** @param {MemoryDocument} document */
  async draw(document, params, id) {
    this.document = document;
    if (recordsNoMemory(document)) {
      // Nothing to plot or list: say why, and how to record memory, rather than show empty figures.
      this.skeleton.showMessage(h('div', {class: 'oc-panel oc-panel-note', id: 'oc-memory-message', role: 'alert'},
        h('div', {class: 'oc-panel-title'}, 'Neither run records memory'),
        h('div', {class: 'oc-panel-text'}, `${document.baseline.run} → ${document.target.run}: no allocations, no ` +
          'memory in use.'),
        h('ul', {class: 'oc-memory-reasons'}, document.notes.map((note) => h('li', {}, note))),
        h('div', {class: 'oc-panel-hint'}, 'Record the runs again with memory profiling on (PyTorch: ' +
          'torch.profiler.profile(profile_memory=True)), or choose other runs on the Compare runs page.')),
      openCompareButton('oc-memory', this.onOpenCompare));
      return;
    }
    this.exportLink.href = memoryCsvUrl(params);
    setText(this.caption, captionText(document));
    this.notes.replaceChildren(...document.notes.map((note) =>
      h('div', {class: 'oc-panel oc-panel-note oc-memory-note'}, note)));
    this.cards.replaceChildren(...SIDES.map((side) => this.runCard(side, document[side])));
    this.drawRows();
    await this.drawPlots(id);
  }

  /**
   * @param {'baseline'|'target'} side
   * @param {MemoryRun} run
   */
  runCard(side, run) {
    const peaks = Object.entries(run.peak_memory_bytes);
    return h('div', {class: 'oc-card oc-memory-card', 'data-side': side, 'data-recorded': String(run.recorded)},
      h('div', {class: 'oc-card-title'}, sideSwatch(side), `${SIDE_LABELS[side]} · peak memory`),
      h('div', {class: 'oc-run-name', title: run.run}, run.run),
      !run.recorded ? h('div', {class: 'oc-card-detail oc-memory-unrecorded'}, 'records no memory') :
        peaks.length ? peaks.map(([device, bytes]) => h('div', {class: 'oc-kv oc-memory-peak', 'data-device': device},
          h('span', {class: 'oc-kv-key'}, device), h('span', {class: 'oc-kv-value'}, formatBytes(bytes)))) :
          h('div', {class: 'oc-card-detail'}, 'no memory in use recorded (allocations per op only)'),
      run.recorded ? h('div', {class: 'oc-card-detail oc-memory-rates'},
        [allocatedText(run), eventsText(run)].filter(Boolean).join(' · ')) : null);
  }

  async drawPlots(id = this.requestId) {
    const plots = devicePlots(this.document);
    if (!plots.length) {
      this.plots.replaceChildren(h('div', {class: 'oc-card oc-memory-no-plot', id: 'oc-memory-no-plot'},
        h('div', {class: 'oc-chart-empty'}, 'Neither run records memory in use over time: nothing to plot. ' +
          'The table below has what each op allocated.')));
      return;
    }
    const charts = plots.map((plot, i) => h('div', {class: 'oc-chart oc-memory-plot', id: `oc-memory-plot-${i}`,
                                                    'data-device': plot.device}));
    this.plots.replaceChildren(...plots.map((plot, i) => h('div', {class: 'oc-card oc-chart-card'},
      h('h3', {class: 'oc-memory-plot-title', title: plotTitle(plot)}, plotTitle(plot)), charts[i])));
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      for (const chart of charts) chart.replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      return;
    }
    for (const [i, plot] of plots.entries()) {
      if (id !== this.requestId || !this.document) return;
      const {data, layout} = memoryFigure(plot, this.document);
      await Plotly.react(charts[i], data, themedLayout(layout), {displaylogo: false, responsive: true});
    }
  }

  /** Draw the plots again (in the current theme), if they are on screen. */
  redraw() {
    if (this.document && !this.element.hidden && !this.body.hidden) this.drawPlots();
  }

  /** @param {Partial<MemoryState>} changes */
  setView(changes) {
    Object.assign(this.state, changes);
    this.drawRows();
    this.onStateChange();
  }

  sortBy(column) {
    const text = Boolean(MEMORY_COLUMNS.find((c) => c.name === column).text);
    const {order} = nextSort({column: sortColumn(this.state.sort), order: this.state.order}, column, text);
    this.setView({sort: column, order});
  }

  drawHead() {
    const sorted = sortColumn(this.state.sort);
    this.head.replaceChildren(...MEMORY_COLUMNS.map((column) => {
      const {ariaSort, mark} = sortIndicator(column.name === sorted, this.state.order);
      const classes = `${column.text ? '' : 'oc-num'}${column.name === sorted ? ' oc-sorted' : ''}`;
      return h('th', {scope: 'col', class: classes, 'data-memory-column': column.name, 'aria-sort': ariaSort,
                      title: column.title, onclick: () => this.sortBy(column.name)},
        column.label, h('span', {class: 'oc-sort-mark'}, mark));
    }));
  }

  drawRows() {
    if (!this.document || recordsNoMemory(this.document)) return;
    this.drawHead();
    const all = this.document.rows;
    const kept = memoryRows(all, this.state);
    this.count.textContent = countText(kept.length, all.length);
    if (!kept.length) {
      this.rows.replaceChildren(h('tr', {}, h('td', {class: 'oc-no-rows', colspan: MEMORY_COLUMNS.length},
        all.length ? 'No op has that name' : 'No op allocated or freed memory in these runs')));
      return;
    }
    this.rows.replaceChildren(...kept.slice(0, MAX_SHOWN).map((row) => this.row(row)));
  }

  /** @param {MemoryRow} row */
  row(row) {
    const bytes = (name) => h('td', {class: 'oc-num', 'data-memory-column': name}, formatBytes(row[name]));
    return h('tr', {class: 'oc-row oc-memory-row', 'data-key': row.key, 'data-status': row.status},
      h('td', {class: 'oc-text', 'data-memory-column': 'key', title: row.key}, row.key),
      bytes('baseline_alloc_bytes'), bytes('target_alloc_bytes'),
      bytes('baseline_alloc_bytes_per_execution'), bytes('target_alloc_bytes_per_execution'),
      bytes('baseline_net_bytes'), bytes('target_net_bytes'),
      h('td', {class: 'oc-num', 'data-memory-column': 'ratio'}, formatSpeedup(row.ratio)),
      h('td', {'data-memory-column': 'status'}, h('span', {class: `oc-status oc-status-${row.status}`},
        formatStatus(row.status))));
  }
}
