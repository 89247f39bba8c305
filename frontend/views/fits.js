// The batch sweep's table of linear fits, one row per op and device, with where the
// accelerator starts to win.

import {h} from '../dom.js';
import {formatShare, formatTime} from '../format.js';
import {sortMissingLast} from '../view.js';
import {nextSort, sortIndicator} from './sorting.js';

/** @typedef {import('../contract.js').SweepDocument} SweepDocument */

const COLUMNS = [
  {name: 'op', label: 'Op', text: true},
  {name: 'device', label: 'Device', text: true},
  {name: 'share', label: 'Share', title: 'mean share of op time across the runs'},
  {name: 'fixed_us', label: 'Fixed', title: 'time at batch size 0 (intercept)'},
  {name: 'per_sample_us', label: 'Per sample', title: 'added time per sample (slope)'},
  {name: 'r2', label: 'R²', title: 'how well the line fits the measured points'},
  {name: 'points', label: 'Points'},
  {name: 'breakeven_batch_size', label: 'Break-even batch', title: 'batch size where the accelerator starts to win'},
];
// A DOM this size stays quick to build on each keystroke in the filter.
const MAX_SHOWN = 2000;

function breakevenText(row) {
  if (row.breakeven_batch_size !== null && row.breakeven_batch_size !== undefined) {
    const size = row.breakeven_batch_size.toFixed(row.breakeven_batch_size < 10 ? 1 : 0);
    return row.gpu_faster === 'below' ? `GPU faster below ${size}` : `GPU faster above ${size}`;
  }
  return {always: 'GPU always faster', never: 'GPU never faster'}[row.gpu_faster] || '–';
}

/** @param {SweepDocument} sweep */
function fitsWithBreakeven(sweep) {
  const crossings = new Map(sweep.breakeven.map((row) => [row.op, row]));
  return sweep.fits.map((fit) => ({...fit, breakeven_batch_size: crossings.get(fit.op)?.batch_size ?? null,
                                   gpu_faster: crossings.get(fit.op)?.gpu_faster ?? null}));
}

function fitRow(row) {
  return h('tr', {class: row.poor_fit ? 'oc-poor-fit' : ''},
    h('td', {class: 'oc-text', title: row.op}, row.op),
    h('td', {}, row.device),
    h('td', {class: 'oc-num'}, formatShare(row.share)),
    h('td', {class: 'oc-num'}, formatTime(row.fixed_us)),
    h('td', {class: 'oc-num'}, formatTime(row.per_sample_us)),
    h('td', {class: 'oc-num', title: row.poor_fit ? 'poor fit: the points are not on a line' : ''},
      row.r2.toFixed(3), row.poor_fit ? ' ⚠' : ''),
    h('td', {class: 'oc-num'}, String(row.points)),
    h('td', {class: 'oc-num'}, breakevenText(row)));
}

export class FitsTable {
  constructor() {
    this.sort = {column: 'share', order: 'desc'};
    /** @type {SweepDocument|null} */
    this.sweep = null;
    this.filter = h('input', {class: 'oc-input oc-filter', type: 'search', placeholder: 'Filter ops',
                              'aria-label': 'filter fits', oninput: () => this.render()});
    this.count = h('span', {class: 'oc-count', id: 'oc-sweep-count'});
    this.head = h('tr');
    this.body = h('tbody');
    this.element = h('div', {class: 'oc-table-scroll oc-fits-scroll'},
      h('table', {class: 'oc-table oc-fits', id: 'oc-fits'}, h('thead', {}, this.head), this.body));
  }

  /** @param {SweepDocument} sweep */
  show(sweep) {
    this.sweep = sweep;
    this.render();
  }

  sortBy(column) {
    this.sort = nextSort(this.sort, column, Boolean(COLUMNS.find((c) => c.name === column).text));
    this.render();
  }

  render() {
    if (!this.sweep) return;
    let rows = fitsWithBreakeven(this.sweep);
    const needle = this.filter.value.toLowerCase();
    if (needle) rows = rows.filter((row) => row.op.toLowerCase().includes(needle));
    const {column, order} = this.sort;
    rows = sortMissingLast(rows, column, order);
    this.head.replaceChildren(...COLUMNS.map((c) => {
      const {ariaSort, mark} = sortIndicator(c.name === column, order);
      return h('th', {'data-column': c.name, title: c.title, class: c.text ? '' : 'oc-num', 'aria-sort': ariaSort,
                      onclick: () => this.sortBy(c.name)}, c.label, h('span', {class: 'oc-sort-mark'}, mark));
    }));
    this.body.replaceChildren(...rows.slice(0, MAX_SHOWN).map(fitRow));
    this.count.textContent = `${rows.length} fits`;
  }
}
