// The per-op table. Only the rows in view are in the DOM (plus a margin), so 5,000
// ops scroll as smoothly as 50.

import {h} from '../dom.js';
import {formatCount, formatShare, formatSignedTime, formatSpeedup, formatStatus, formatTime, speedupColor,
        truncateMiddle} from '../format.js';
import {sortIndicator} from './sorting.js';

/** @typedef {import('../contract.js').CompareRow} CompareRow */

const ROW_HEIGHT = 28;
const OVERSCAN = 12;

const COLUMNS = [
  {name: 'key', label: 'Op', kind: 'text', width: 'auto'}, // takes what the others leave
  {name: 'op_type', label: 'Type', kind: 'text', width: '13%'},
  {name: 'status', label: 'Status', kind: 'status', width: '92px'},
  {name: 'speedup', label: 'Speedup', kind: 'speedup', width: '86px',
   title: 'baseline mean / target mean (> 1: the target is faster)'},
  {name: 'baseline_mean_us', label: 'Base mean', kind: 'mean', side: 'baseline', width: '86px',
   title: 'self time per occurrence; hover a value for its spread (~: noisy, the mean hides a wide spread)'},
  {name: 'target_mean_us', label: 'Target mean', kind: 'mean', side: 'target', width: '94px',
   title: 'self time per occurrence; hover a value for its spread (~: noisy, the mean hides a wide spread)'},
  {name: 'delta_mean_us', label: 'Δ mean', kind: 'delta', width: '80px',
   title: 'target mean − baseline mean'},
  {name: 'baseline_total_us', label: 'Base total', kind: 'time', width: '84px'},
  {name: 'target_total_us', label: 'Target total', kind: 'time', width: '92px'},
  {name: 'baseline_share', label: 'Base %', kind: 'share', width: '62px', title: 'share of all op time in the baseline'},
  {name: 'target_share', label: 'Target %', kind: 'share', width: '68px', title: 'share of all op time in the target'},
  {name: 'baseline_occurrences', label: 'Base #', kind: 'count', width: '58px', title: 'occurrences in the baseline'},
  {name: 'target_occurrences', label: 'Target #', kind: 'count', width: '64px', title: 'occurrences in the target'},
];

/** Whether `name` is a column of words (sorted A first) rather than of numbers. */
export function isTextColumn(name) {
  const column = COLUMNS.find((candidate) => candidate.name === name);
  return column.kind === 'text' || column.kind === 'status';
}

/** The spread behind a mean, as the tooltip says it. */
function spreadText(row, side) {
  const mean = row[`${side}_mean_us`];
  if (mean === null || mean === undefined) return '';
  const parts = [`mean ${mean.toFixed(3)} µs`];
  const kernels = row[`${side}_kernels_per_execution`];
  if (kernels !== null && kernels !== undefined) {
    const shown = Number(kernels.toFixed(2));
    parts.push(`device time of ${shown} kernel${shown === 1 ? '' : 's'} per execution`);
  }
  const median = row[`${side}_median_us`];
  if (median !== null && median !== undefined) {
    parts.push(`median ${formatTime(median)}`,
               `p10–p90 ${formatTime(row[`${side}_p10_us`])} – ${formatTime(row[`${side}_p90_us`])}`);
  }
  const cv = row[`${side}_cv`];
  if (cv !== null && cv !== undefined) parts.push(`CV ${cv.toFixed(2)}`);
  const perStep = row[`${side}_per_step_cv`];
  if (perStep !== null && perStep !== undefined) parts.push(`per step: CV ${perStep.toFixed(2)}`);
  if (row[`${side}_noisy`]) parts.push('noisy: the mean hides a wide spread, so the speedup is unreliable');
  return parts.join(' · ');
}

function cell(column, row, characters) {
  const value = row[column.name];
  switch (column.kind) {
    case 'text':
      return h('td', {class: 'oc-text', title: value || ''},
               value ? truncateMiddle(value, characters[column.name] || value.length) : '–');
    case 'status':
      return h('td', {}, h('span', {class: `oc-status oc-status-${value}`}, formatStatus(value)));
    case 'speedup': {
      const colours = speedupColor(value);
      const chip = h('span', {class: 'oc-speedup'}, formatSpeedup(value));
      if (colours) Object.assign(chip.style, colours);
      return h('td', {class: 'oc-num'}, chip);
    }
    case 'time':
      return h('td', {class: 'oc-num', title: value === null ? '' : `${value.toFixed(3)} µs`}, formatTime(value));
    case 'mean': {
      const noisy = row[`${column.side}_noisy`];
      return h('td', {class: `oc-num${noisy ? ' oc-noisy' : ''}`, title: spreadText(row, column.side)},
               formatTime(value) + (noisy ? ' ~' : ''));
    }
    case 'delta':
      return h('td', {class: `oc-num ${value < 0 ? 'oc-better' : value > 0 ? 'oc-worse' : ''}`}, formatSignedTime(value));
    case 'share':
      return h('td', {class: 'oc-num'}, formatShare(value));
    default:
      return h('td', {class: 'oc-num'}, formatCount(value));
  }
}

export class OpTable {
  /** @param {{onSort: (column: string) => void}} handlers a header was clicked */
  constructor({onSort}) {
    this.rows = [];
    this.onSort = onSort;
    this.body = h('tbody');
    this.headerCells = COLUMNS.map((column) =>
      h('th', {scope: 'col', title: column.title, 'data-column': column.name,
               class: isTextColumn(column.name) ? '' : 'oc-num',
               onclick: () => this.onSort(column.name)},
        h('span', {}, column.label), h('span', {class: 'oc-sort-mark'})));
    this.table = h('table', {class: 'oc-table'},
      h('colgroup', {}, COLUMNS.map((column) => h('col', {style: {width: column.width === 'auto' ? null : column.width}}))),
      h('thead', {}, h('tr', {}, this.headerCells)),
      this.body);
    this.element = h('div', {class: 'oc-table-scroll', role: 'region', 'aria-label': 'ops'}, this.table);
    this.element.addEventListener('scroll', () => this.renderWindow(), {passive: true});
    this.lastWindow = null;
    window.addEventListener('resize', () => {
      this.lastWindow = null;
      this.renderWindow();
    });
  }

  /**
   * @param {CompareRow[]} rows
   * @param {string|null} sort
   * @param {'asc'|'desc'} order
   */
  setRows(rows, sort, order) {
    this.rows = rows;
    for (const th of this.headerCells) {
      const sorted = th.dataset.column === sort;
      const {ariaSort, mark} = sortIndicator(sorted, order);
      th.classList.toggle('oc-sorted', sorted);
      th.setAttribute('aria-sort', ariaSort);
      th.querySelector('.oc-sort-mark').textContent = mark;
    }
    this.lastWindow = null;
    this.renderWindow();
  }

  /** Width of one character of the op-name font, measured once it is laid out. */
  monospaceCharWidth() {
    if (!this.charWidth) {
      const probe = h('span', {class: 'oc-text', style: {position: 'absolute', visibility: 'hidden'}}, 'M'.repeat(40));
      this.element.append(probe);
      this.charWidth = probe.getBoundingClientRect().width / 40 || 7.3;
      probe.remove();
    }
    return this.charWidth;
  }

  renderWindow() {
    const viewport = this.element.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.element.scrollTop / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.rows.length, Math.ceil((this.element.scrollTop + viewport) / ROW_HEIGHT) + OVERSCAN);
    const span = `${first}:${last}`;
    if (span === this.lastWindow) return;
    this.lastWindow = span;
    const spacer = (height) => h('tr', {class: 'oc-spacer', 'aria-hidden': 'true', style: {height: `${height}px`}},
                                   h('td', {colspan: COLUMNS.length}));
    const characters = {};
    const charWidth = this.monospaceCharWidth();
    for (const [index, column] of COLUMNS.entries()) {
      const width = this.headerCells[index].clientWidth;
      if (column.kind === 'text' && width) characters[column.name] = Math.max(8, Math.floor((width - 16) / charWidth));
    }
    const visible = this.rows.slice(first, last).map((row) =>
      h('tr', {class: 'oc-row', 'data-key': row.key}, COLUMNS.map((column) => cell(column, row, characters))));
    if (!this.rows.length) {
      this.body.replaceChildren(h('tr', {}, h('td', {colspan: COLUMNS.length, class: 'oc-no-rows'},
                                                   'No ops match these filters.')));
      return;
    }
    this.body.replaceChildren(spacer(first * ROW_HEIGHT), ...visible,
                              spacer((this.rows.length - last) * ROW_HEIGHT));
  }
}
