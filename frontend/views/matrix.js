// The "Matrix" view: the steady-state step latency and throughput of every model, precision,
// compiler and batch size (rows) on every device (columns), with each cell's speedup
// against its row's cell on the reference device. The matrix route computes it all; this draws its
// document as it is, sorts its rows by a column's latency, and opens the comparison of a
// cell's run with its row's reference run.

import {fetchMatrix, matrixCsvUrl} from '../api.js';
import {STEP_PARTS} from '../contract.js';
import {h, setText} from '../dom.js';
import {formatSpeedup, formatThroughput, formatTime, speedupColor} from '../format.js';
import {matrixParams, warmupSteps} from '../state.js';
import {sortMissingLast} from '../view.js';
import {showLatest} from './latest.js';
import {PageSkeleton} from './skeleton.js';
import {nextSort, sortIndicator} from './sorting.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').MatrixDocument} MatrixDocument */
/** @typedef {import('../contract.js').MatrixRow} MatrixRow */
/** @typedef {import('../contract.js').MatrixCell} MatrixCell */
/** @typedef {import('../state.js').MatrixState} MatrixState */
/** @typedef {import('../api.js').ApiError} ApiError */

/**
 * A row of the matrix with its filled cells by column key.
 * @typedef {Object} GridRow
 * @property {MatrixRow} row
 * @property {Map<string, MatrixCell>} cells
 */

/**
 * How the rows are ordered: by one column's latency, or (column null) as the route
 * orders them (by model, then precision and compiler, then batch size).
 * @typedef {Object} MatrixSort
 * @property {string|null} column a column's key
 * @property {'asc'|'desc'} order
 */

const DEFAULT_WARMUP = 'detected per run (steps slower than 1.5× the median of the steps after them)';
const RUNS_IN_TOOLTIP = 6;

/** @param {MatrixRow|MatrixCell} row */
function rowKey(row) {
  return JSON.stringify([row.model, row.precision, row.compiler, row.batch_size]);
}

/** "3 runs" */
function count(number, word) {
  return `${number} ${word}${number === 1 ? '' : 's'}`;
}

/**
 * The document's rows, in its order, each with its filled cells by column key.
 * @param {MatrixDocument} document
 * @returns {GridRow[]}
 */
export function matrixGrid(document) {
  const rows = new Map(document.rows.map((row) => [rowKey(row), {row, cells: new Map()}]));
  for (const cell of document.cells) {
    const entry = rows.get(rowKey(cell));
    if (entry) entry.cells.set(cell.column, cell);
  }
  return [...rows.values()];
}

/**
 * The rows ordered by one column's mean latency, rows without it last either way; as they
 * are where no column is chosen.
 * @param {GridRow[]} grid
 * @param {MatrixSort} sort
 * @returns {GridRow[]}
 */
export function sortGrid(grid, sort) {
  if (!sort.column) return grid;
  const keyed = grid.map((entry) => ({entry, latency: entry.cells.get(sort.column)?.latency_us ?? null}));
  return sortMissingLast(keyed, 'latency', sort.order).map(({entry}) => entry);
}


/** "p10–p90 2.12 ms – 2.80 ms", or null without both ends. */
export function rangeText(cell) {
  if (cell.latency_p10_us === null || cell.latency_p90_us === null) return null;
  return `p10–p90 ${formatTime(cell.latency_p10_us)} – ${formatTime(cell.latency_p90_us)}`;
}

/**
 * What a cell pools, as its tooltip says it: the runs, the steady steps and the warm-up
 * steps left out, and the spread of the steps.
 * @param {MatrixCell} cell
 * @returns {string}
 */
export function poolText(cell) {
  const runs = cell.runs.slice(0, RUNS_IN_TOOLTIP).join(', ') +
    (cell.runs.length > RUNS_IN_TOOLTIP ? `, +${cell.runs.length - RUNS_IN_TOOLTIP} more` : '');
  const lines = [`${count(cell.runs.length, 'run')} pooled: ${runs}`,
                 `${count(cell.steps, 'steady step')}, ${count(cell.warmup_steps, 'warm-up step')} left out`];
  if (cell.latency_us === null) lines.push('no step markers: no latency');
  else if (cell.latency_std_us !== null) lines.push(`standard deviation ${formatTime(cell.latency_std_us)}`);
  return lines.join('\n');
}

/**
 * The runs a click on `cell` compares: its row's reference run as the baseline and the
 * cell's run as the target (each the first of its cell); null for the reference cell
 * itself and in a row without a reference cell. The server marks each row's reference
 * cell (the reference column's, or the row's own CPU cell where it has none there).
 * @param {GridRow} entry
 * @param {MatrixCell} cell
 * @returns {{baseline: string, target: string}|null}
 */
export function comparedRuns(entry, cell) {
  const referenceCell = [...entry.cells.values()].find((other) => other.reference);
  if (cell.reference || !referenceCell || !referenceCell.runs.length || !cell.runs.length) return null;
  return {baseline: referenceCell.runs[0], target: cell.runs[0]};
}

/** @param {ApiError} error */
/**
 * A cell's time in the chosen part of its step, and that part's speedup against its row's
 * reference cell: `waiting for input 40.2 µs · 1.52×`.
 * @param {string} part
 * @param {MatrixCell} cell
 */
export function partLine(part, cell) {
  const label = STEP_PARTS[part] || part;
  if (cell.part_us === null) {
    return h('div', {class: 'oc-matrix-part oc-matrix-part-missing',
                     title: 'its runs do not split their steps (or, for a device part, ran on no device)'},
      `${label} –`);
  }
  return h('div', {class: 'oc-matrix-part', title: `${label}: its time in the cell's median steady step`},
    `${label} ${formatTime(cell.part_us)}`,
    ...(cell.reference || cell.part_speedup === null ? [] : [' · ',
      h('span', {class: 'oc-speedup', style: speedupColor(cell.part_speedup)}, formatSpeedup(cell.part_speedup))]));
}

function matrixFailed(error) {
  const title = error.status === 400 ? 'The matrix cannot be made as asked' : 'The matrix failed';
  const hint = error.status === 400 ? 'Choose another reference column, or clear the warm-up steps.' : null;
  return messageBox({kind: 'error', title, text: error.message, hint, id: 'oc-matrix-message'});
}

export class MatrixView {
  /**
   * @param {{state: MatrixState, onStateChange: () => void,
   *          onOpenCompare: (runs: {baseline: string, target: string}) => void}} options
   *   `state` is changed in place, then `onStateChange` runs; `onOpenCompare` shows the
   *   comparison of two runs
   */
  constructor({state, onStateChange, onOpenCompare}) {
    this.state = state;
    this.onStateChange = onStateChange;
    this.onOpenCompare = onOpenCompare;
    this.requestId = 0;
    this.loading = null; // the matrix being fetched and drawn, with its parameters
    this.shownKey = null; // the parameters of the matrix on screen
    /** @type {MatrixDocument|null} */
    this.document = null;
    /** @type {string[]} the column keys of the last matrix read: the reference's choices */
    this.columnKeys = [];
    /** @type {MatrixSort} */
    this.sort = {column: null, order: 'desc'};
    this.element = h('section', {class: 'oc-matrix-view', id: 'oc-matrix'});
    this.build();
  }

  build() {
    this.referenceSelect = h('select', {class: 'oc-select oc-matrix-reference-select', id: 'oc-matrix-reference',
                                        'aria-label': 'reference column',
                                        title: 'the column each row\'s speedups are against',
                                        onchange: () => this.change({reference: this.referenceSelect.value || null})});
    this.warmupInput = h('input', {class: 'oc-input oc-short', id: 'oc-matrix-warmup', type: 'number', min: 0,
                                   step: 1, placeholder: 'detected', 'aria-label': 'warm-up steps',
                                   title: 'leading steps of every run left out; empty: detected per run',
                                   onchange: () => this.chooseWarmup()});
    this.partSelect = h('select', {class: 'oc-select', id: 'oc-matrix-part', 'aria-label': 'part of the step',
                                   title: 'also each cell\'s time in one part of its step, and that part\'s speedup',
                                   onchange: () => this.change({part: this.partSelect.value || null})},
      h('option', {value: ''}, 'whole step only'),
      ...Object.entries(STEP_PARTS).map(([key, label]) => h('option', {value: key}, label)));
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-matrix-export', download: '', href: '#'}, 'Download CSV');
    this.showState();
    this.warnings = h('div', {class: 'oc-notices', id: 'oc-matrix-warnings'});
    this.caption = h('div', {class: 'oc-matrix-caption', id: 'oc-matrix-caption'});
    this.head = h('tr');
    this.rows = h('tbody');
    this.table = h('table', {class: 'oc-table oc-matrix', id: 'oc-matrix-table'}, h('thead', {}, this.head), this.rows);
    this.body = h('div', {class: 'oc-body'}, this.warnings, this.caption,
      h('div', {class: 'oc-table-scroll oc-matrix-scroll'}, this.table));
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink,
                                      loadingText: 'Reading every run…'});
    this.element.replaceChildren(
      h('section', {class: 'oc-chooser'},
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Reference'), this.referenceSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Warm-up steps'), this.warmupInput),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Step part'), this.partSelect),
        h('span', {class: 'oc-spacer-flex'}), this.exportLink),
      this.skeleton.message,
      this.skeleton.element);
  }

  /** The controls as the state says (a link, or the user's last change). */
  showState() {
    this.warmupInput.value = this.state.warmup === null ? '' : String(this.state.warmup);
    this.warmupInput.classList.remove('oc-invalid');
    this.partSelect.value = this.state.part && this.state.part in STEP_PARTS ? this.state.part : '';
    this.showReferences();
  }

  /**
   * The reference's choices: the columns of the last matrix read, the one asked for where
   * no run has it (the route then names it in a warning), and the route's default where
   * no column is known yet (a link whose reference the route refuses).
   */
  showReferences() {
    const shown = this.document ? this.document.reference : this.state.reference;
    const options = this.columnKeys.map((key) => h('option', {value: key}, key));
    if (shown && !this.columnKeys.includes(shown)) {
      options.push(h('option', {value: shown}, `${shown} (${this.document ? 'no runs' : 'as asked'})`));
    }
    if (!this.columnKeys.length) options.unshift(h('option', {value: ''}, 'Default (CPU)'));
    this.referenceSelect.replaceChildren(...options);
    this.referenceSelect.value = shown || '';
  }

  /** The warm-up typed: steps (0 or more), or nothing to detect it. */
  chooseWarmup() {
    const text = this.warmupInput.value.trim();
    const steps = warmupSteps(text);
    const valid = !text || steps !== null;
    this.warmupInput.classList.toggle('oc-invalid', !valid);
    if (valid) this.change({warmup: steps});
  }

  change(changes) {
    Object.assign(this.state, changes);
    this.onStateChange();
    this.show();
  }

  /** Each time the view is opened or changed: the matrix, unless it is on screen. */
  show() {
    return showLatest(this, matrixParams(this.state), {
      fetch: fetchMatrix,
      failed: (error) => {
        this.document = null;
        this.showReferences();
        return matrixFailed(error);
      },
      draw: (document, params) => this.draw(document, params),
    });
  }

  draw(document, params) {
    this.document = document;
    this.columnKeys = document.columns.map((column) => column.key);
    this.showReferences();
    if (!document.columns.length) {
      this.skeleton.showMessage(messageBox({kind: 'note', title: 'No runs to place', id: 'oc-matrix-message',
        text: 'The matrix places every run of the logdir by model, precision, compiler and batch size against ' +
          'its device; this logdir has none it could read.', hint: document.warnings.join('\n') || null}));
      return;
    }
    this.exportLink.href = matrixCsvUrl(params);
    this.warnings.replaceChildren(...document.warnings.map((warning) =>
      h('div', {class: 'oc-panel oc-panel-warning oc-matrix-warning'}, warning)));
    setText(this.caption, `${count(document.rows.length, 'row')} × ${count(document.columns.length, 'column')}: ` +
      `median steady step, its p10–p90, samples a second, and the speedup against ${document.reference || 'no column'} ` +
      `(its latency / the cell's, in the same row). Warm-up: ` +
      (document.warmup === null ? DEFAULT_WARMUP : `the first ${count(document.warmup, 'step')} of every run`) +
      '. Click a cell to compare its run with the reference run of its row.');
    this.drawTable();
  }

  /** @param {string|null} column a column's key; null: the route's order */
  sortBy(column) {
    this.sort = column === null ? {column: null, order: 'desc'} : nextSort(this.sort, column, false);
    this.drawTable();
  }

  drawTable() {
    const document = this.document;
    if (!document) return;
    const {column: sorted, order} = this.sort;
    this.head.replaceChildren(
      h('th', {class: `oc-matrix-row-head${sorted === null ? ' oc-sorted' : ''}`,
               title: 'click to order the rows by model, then precision and compiler, then batch size',
               onclick: () => this.sortBy(null)},
        'Model · precision · compiler · batch'),
      ...document.columns.map((column) => {
        const isReference = column.key === document.reference;
        const {ariaSort, mark} = sortIndicator(column.key === sorted, order);
        return h('th', {class: `oc-num oc-matrix-column${isReference ? ' oc-matrix-reference' : ''}` +
                          (column.key === sorted ? ' oc-sorted' : ''),
                        'data-column': column.key, 'aria-sort': ariaSort,
                        title: `${column.key}: click to sort the rows by its latency`,
                        onclick: () => this.sortBy(column.key)},
          h('div', {class: 'oc-matrix-device'}, column.device, h('span', {class: 'oc-sort-mark'}, mark)),
          isReference ? h('div', {class: 'oc-matrix-reference-mark'}, 'reference') : null);
      }));
    const grid = sortGrid(matrixGrid(document), this.sort);
    this.rows.replaceChildren(...grid.map((entry) => h('tr', {class: 'oc-row', 'data-model': entry.row.model,
                                                              'data-precision': entry.row.precision,
                                                              'data-compiler': entry.row.compiler,
                                                              'data-batch-size': String(entry.row.batch_size)},
      h('th', {class: 'oc-matrix-row-head', scope: 'row'},
        h('div', {class: 'oc-text'}, entry.row.model),
        h('div', {class: 'oc-matrix-configuration'}, `${entry.row.precision} · ${entry.row.compiler}`),
        h('div', {class: 'oc-matrix-batch'}, `batch ${entry.row.batch_size ?? '?'}`)),
      ...document.columns.map((column) => this.cell(entry, column.key)))));
  }

  /**
   * @param {GridRow} entry
   * @param {string} columnKey
   */
  cell(entry, columnKey) {
    const cell = entry.cells.get(columnKey);
    const reference = columnKey === this.document.reference ? ' oc-matrix-reference' : '';
    if (!cell) return h('td', {class: `oc-matrix-cell oc-matrix-empty${reference}`, 'data-column': columnKey,
                               title: 'no run'});
    const runs = comparedRuns(entry, cell);
    const open = runs ? () => this.onOpenCompare(runs) : null;
    const range = rangeText(cell);
    return h('td', {class: `oc-matrix-cell${reference}${runs ? ' oc-matrix-link' : ''}`, 'data-column': columnKey,
                    title: poolText(cell) + (runs ? `\nclick: compare ${runs.target} with ${runs.baseline}` : ''),
                    tabindex: runs ? 0 : null, role: runs ? 'button' : null, onclick: open,
                    onkeydown: runs ? (event) => {
                      if (event.key !== 'Enter' && event.key !== ' ') return;
                      event.preventDefault();
                      open();
                    } : null},
      h('div', {class: 'oc-matrix-latency'}, cell.latency_us === null ? 'no step markers' : formatTime(cell.latency_us)),
      range ? h('div', {class: 'oc-matrix-range'}, range) : null,
      h('div', {class: 'oc-matrix-throughput'}, formatThroughput(cell.throughput_per_s)),
      this.document.part ? partLine(this.document.part, cell) : null,
      h('div', {class: 'oc-matrix-speedup'}, cell.reference ? h('span', {class: 'oc-matrix-reference-word'}, 'reference') :
        h('span', {class: 'oc-speedup', style: speedupColor(cell.speedup),
                   title: cell.speedup === null ? 'no speedup: no reference latency in this row' : null},
          formatSpeedup(cell.speedup))));
  }
}
