// The batch sweep's table of linear fits, one row per op and line (a device, precision or
// compiler), with where the target line starts to win.

import {h} from '../dom.js';
import {formatBreakeven, formatShare, formatTime} from '../format.js';
import {sortMissingLast} from '../view.js';
import {nextSort, sortIndicator} from './sorting.js';

/** @typedef {import('../contract.js').SweepDocument} SweepDocument */
/** @typedef {import('../state.js').FitsView} FitsView */

export const SERIES_LABELS = {device: 'Device', precision: 'Precision', compiler: 'Compiler'};
const COLUMNS = [
  {name: 'op', label: 'Op', text: true},
  {name: 'series', label: 'Line', text: true},  // named after the sweep's series_by when shown
  {name: 'share', label: 'Share', title: 'mean share of op time across the runs'},
  {name: 'fixed_us', label: 'Fixed', title: 'time at batch size 0 (intercept)'},
  {name: 'per_sample_us', label: 'Per sample', title: 'added time per sample (slope)'},
  {name: 'r2', label: 'R²', title: 'how well the line fits the measured points'},
  {name: 'points', label: 'Points'},
  {name: 'breakeven_batch_size', label: 'Break-even batch', title: 'batch size where the target line starts to win'},
];
// A DOM this size stays quick to build on each keystroke in the filter.
const MAX_SHOWN = 2000;
const NOT_FITTED_ON_BOTH = 'no break-even: this op is not fitted on both lines (each needs two or more batch sizes)';

/**
 * @param {Object} row
 * @param {string|null} noBreakeven why no op of the sweep can have a break-even
 * @param {string|null} target the line break-evens are of (GPU, bf16)
 */
function fitRow(row, noBreakeven, target) {
  return h('tr', {class: row.poor_fit ? 'oc-poor-fit' : ''},
    h('td', {class: 'oc-text', title: row.op}, row.op),
    h('td', {}, row.series),
    h('td', {class: 'oc-num'}, formatShare(row.share)),
    h('td', {class: 'oc-num'}, formatTime(row.fixed_us)),
    h('td', {class: 'oc-num'}, formatTime(row.per_sample_us)),
    h('td', {class: 'oc-num', title: row.poor_fit ? 'poor fit: the points are not on a line' : ''},
      row.r2 === null || row.r2 === undefined ? '–' : row.r2.toFixed(3), row.poor_fit ? ' ⚠' : ''),
    h('td', {class: 'oc-num'}, String(row.points)),
    h('td', {class: 'oc-num', title: row.target_faster ? '' : noBreakeven || NOT_FITTED_ON_BOTH},
      formatBreakeven(row.breakeven_batch_size, row.target_faster, target)));
}

export class FitsTable {
  /** @param {{onChange: () => void}} handlers the sort or the filter changed */
  constructor({onChange}) {
    /** @type {FitsView} */
    this.view = {sort: 'share', order: 'desc', op_contains: ''};
    this.onChange = onChange;
    /** @type {SweepDocument|null} */
    this.sweep = null;
    this.noBreakeven = null;
    this.filter = h('input', {class: 'oc-input oc-filter', id: 'oc-fits-filter', type: 'search',
                              placeholder: 'Filter ops', 'aria-label': 'filter fits',
                              oninput: () => this.setView({op_contains: this.filter.value})});
    this.count = h('span', {class: 'oc-count', id: 'oc-sweep-count'});
    this.head = h('tr');
    this.body = h('tbody');
    this.element = h('div', {class: 'oc-table-scroll oc-fits-scroll'},
      h('table', {class: 'oc-table oc-fits', id: 'oc-fits'}, h('thead', {}, this.head), this.body));
  }

  /**
   * @param {SweepDocument} sweep
   * @param {string|null} noBreakeven why no op of it can have a break-even, if so
   */
  show(sweep, noBreakeven) {
    this.sweep = sweep;
    this.noBreakeven = noBreakeven;
    this.render();
  }

  /** @param {Partial<FitsView>} changes */
  setView(changes) {
    Object.assign(this.view, changes);
    this.render();
    this.onChange();
  }

  sortBy(column) {
    const {order} = nextSort({column: this.view.sort, order: this.view.order}, column,
                             Boolean(COLUMNS.find((c) => c.name === column).text));
    this.setView({sort: column, order});
  }

  render() {
    if (!this.sweep) return;
    const {sort, order, op_contains: opContains} = this.view;
    // The rule of the sweep.csv route's op_contains and sort, so the export is this table.
    const needle = opContains.toLowerCase();
    const rows = sortMissingLast(this.sweep.fits.filter((row) => row.op.toLowerCase().includes(needle)), sort, order);
    this.head.replaceChildren(...COLUMNS.map((c) => {
      const {ariaSort, mark} = sortIndicator(c.name === sort, order);
      const label = c.name === 'series' ? SERIES_LABELS[this.sweep.series_by] || c.label : c.label;
      return h('th', {'data-column': c.name, title: c.title, class: c.text ? '' : 'oc-num', 'aria-sort': ariaSort,
                      onclick: () => this.sortBy(c.name)}, label, h('span', {class: 'oc-sort-mark'}, mark));
    }));
    this.body.replaceChildren(...rows.slice(0, MAX_SHOWN).map((row) =>
      fitRow(row, this.noBreakeven, this.sweep.target_series)));
    this.count.textContent = `${rows.length} fits`;
  }
}
