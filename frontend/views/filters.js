// The bar above the op table: the row view's controls (filter, statuses, host or device,
// minimum time, top N, significant changes only), how many rows are shown, and the CSV
// export of exactly those.

import {h} from '../dom.js';
import {capitalise, formatCount, formatStatus, parseTime} from '../format.js';
import {positiveInteger, statusesOrAll} from '../state.js';
import {STATUSES} from '../view.js';

/** @typedef {import('../view.js').RowView} RowView */

const QUERY_DEBOUNCE_MS = 120;
const NO_CHECK = 'Needs the Confidence check, which needs repeats of both runs (record --repeats N)';

export class RowFilters {
  /**
   * @param {RowView} view shown at first
   * @param {Object} handlers
   * @param {(changes: Partial<RowView>) => void} handlers.onViewChange
   * @param {(query: string) => Promise<string|null|undefined>} handlers.checkQuery why the server
   *   rejects `query` (an invalid `/regex/`), or nothing
   * @param {boolean} handlers.significant whether "significant changes only" is asked for at first
   * @param {(significant: boolean) => void} handlers.onSignificantChange
   */
  constructor(view, {onViewChange, checkQuery, significant, onSignificantChange}) {
    this.onViewChange = onViewChange;
    this.checkQuery = checkQuery;
    this.significant = significant;
    // Enabled once the Confidence card has a check with significant changes (showSignificant).
    this.significantBox = h('input', {type: 'checkbox', id: 'oc-significant', disabled: true,
      onchange: () => {
        this.significant = this.significantBox.checked;
        onSignificantChange(this.significant);
      }});
    this.significantLabel = h('label', {class: 'oc-check oc-significant', title: NO_CHECK},
                              this.significantBox, 'Significant changes only');
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
      this.significantLabel,
      // Together at the right end, also where the bar wraps.
      h('span', {class: 'oc-filters-end'}, this.count, this.exportLink));
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
   * Whether the "significant changes only" box can narrow the table: it needs the
   * check's significant keys. The choice is kept while it cannot, and shows once it can.
   * @param {{keys: string[]}|null} significant the Confidence check's significantly changed
   *   ops (null: no check, while one loads or where there is none)
   */
  showSignificant(significant) {
    const count = significant ? significant.keys.length : 0;
    this.significantBox.disabled = !count;
    this.significantBox.checked = Boolean(count) && this.significant;
    this.significantLabel.classList.toggle('oc-disabled', !count);
    this.significantLabel.title = !significant ? NO_CHECK : !count ? 'The Confidence check finds no significant change' :
      `Only the ${count} ${count === 1 ? 'op' : 'ops'} the Confidence check finds significantly slower or faster, ` +
      'or run on one side only';
  }

  /**
   * @param {number} shown
   * @param {number} total
   * @param {string} exportUrl the CSV of the rows shown
   * @param {number} [matched] the rows the view keeps, where more than the tab shows
   */
  showRows(shown, total, exportUrl, matched = shown) {
    this.count.textContent = matched > shown ?
      `Showing the first ${formatCount(shown)} of ${formatCount(matched)} matching ops (of ${formatCount(total)}); ` +
        'the CSV has them all' :
      `Showing ${formatCount(shown)} of ${formatCount(total)} ops`;
    this.exportLink.href = exportUrl;
  }
}
