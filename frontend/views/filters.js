// The bar above the op table: the row view's controls (filter, statuses, host or device,
// minimum time, top N), how many rows are shown, and the CSV export of exactly those.

import {h} from '../dom.js';
import {capitalise, formatCount, formatStatus, parseTime} from '../format.js';
import {positiveInteger, statusesOrAll} from '../state.js';
import {STATUSES} from '../view.js';

/** @typedef {import('../view.js').RowView} RowView */

const QUERY_DEBOUNCE_MS = 120;

export class RowFilters {
  /**
   * @param {RowView} view shown at first
   * @param {Object} handlers
   * @param {(changes: Partial<RowView>) => void} handlers.onViewChange
   * @param {(query: string) => Promise<string|null|undefined>} handlers.checkQuery why the server
   *   rejects `query` (an invalid `/regex/`), or nothing
   */
  constructor(view, {onViewChange, checkQuery}) {
    this.onViewChange = onViewChange;
    this.checkQuery = checkQuery;
    this.filterInput = h('input', {class: 'oc-input oc-filter', id: 'oc-filter', type: 'search', value: view.q,
                                   placeholder: 'Filter ops: name or type, or /regex/', 'aria-label': 'filter ops',
                                   oninput: () => this.onFilterInput()});
    this.statusBoxes = STATUSES.map((status) => h('input', {type: 'checkbox', value: status,
      checked: view.status.includes(status), onchange: () => this.onStatusChange()}));
    this.sideSelect = h('select', {class: 'oc-select', id: 'oc-side', 'aria-label': 'host or device ops',
                                   onchange: () => this.onViewChange({side: this.sideSelect.value})},
      h('option', {value: 'all'}, 'Host and device'), h('option', {value: 'host'}, 'Host ops'),
      h('option', {value: 'device'}, 'Device ops'));
    this.sideSelect.value = view.side;
    this.minInput = h('input', {class: 'oc-input oc-short', id: 'oc-min', placeholder: 'e.g. 1ms',
                                value: view.min_us ? `${view.min_us}us` : '',
                                'aria-label': 'minimum total time', oninput: () => this.onMinInput()});
    this.topInput = h('input', {class: 'oc-input oc-short', id: 'oc-top', type: 'number', min: 1, placeholder: 'all',
                                value: view.top || '', 'aria-label': 'top N ops',
                                oninput: () => this.onViewChange({top: positiveInteger(this.topInput.value)})});
    this.count = h('span', {class: 'oc-count', id: 'oc-count', 'aria-live': 'polite'});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-export', download: '', href: '#'}, 'Export CSV');
    this.element = h('section', {class: 'oc-filters', 'aria-label': 'filters'},
      this.filterInput,
      h('div', {class: 'oc-checks'}, STATUSES.map((status, i) =>
        h('label', {class: 'oc-check'}, this.statusBoxes[i], capitalise(formatStatus(status))))),
      this.sideSelect,
      h('label', {class: 'oc-inline-label'}, 'Min total', this.minInput),
      h('label', {class: 'oc-inline-label'}, 'Top', this.topInput),
      h('span', {class: 'oc-spacer-flex'}),
      this.count, this.exportLink);
  }

  /** The query applies once typing pauses, and only if the server accepts it: an invalid
   *  regex, half typed, changes nothing. */
  onFilterInput() {
    clearTimeout(this.filterTimer);
    this.filterTimer = setTimeout(async () => {
      const query = this.filterInput.value;
      const error = await this.checkQuery(query);
      if (query !== this.filterInput.value) return; // typed on meanwhile
      this.showQueryError(error);
      if (!error) this.onViewChange({q: query});
    }, QUERY_DEBOUNCE_MS);
  }

  /** @param {string|null|undefined} error */
  showQueryError(error) {
    this.filterInput.classList.toggle('oc-invalid', Boolean(error));
    this.filterInput.title = error || '';
  }

  onStatusChange() {
    const chosen = this.statusBoxes.filter((box) => box.checked).map((box) => box.value);
    this.onViewChange({status: statusesOrAll(chosen)});
  }

  onMinInput() {
    const text = this.minInput.value.trim();
    const value = text ? parseTime(text) : 0;
    this.minInput.classList.toggle('oc-invalid', value === null);
    if (value !== null) this.onViewChange({min_us: value});
  }

  /**
   * @param {number} shown
   * @param {number} total
   * @param {string} exportUrl the CSV of the rows shown
   */
  showRows(shown, total, exportUrl) {
    this.count.textContent = `Showing ${formatCount(shown)} of ${formatCount(total)} ops`;
    this.exportLink.href = exportUrl;
  }
}
