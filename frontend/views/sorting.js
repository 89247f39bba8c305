// Sortable column headers, the same in the op table and the sweep's fits table.

/**
 * The sort after a click on `column`: the sorted column flips direction; another starts
 * ascending for text (A first) and descending for numbers (largest first).
 * @param {{column: string|null, order: 'asc'|'desc'}} current
 * @param {string} column
 * @param {boolean} isText
 * @returns {{column: string, order: 'asc'|'desc'}}
 */
export function nextSort(current, column, isText) {
  if (current.column === column) return {column, order: current.order === 'asc' ? 'desc' : 'asc'};
  return {column, order: isText ? 'asc' : 'desc'};
}

/**
 * How a header shows its sort: `aria-sort`, and the mark beside its label.
 * @param {boolean} sorted
 * @param {'asc'|'desc'} order
 */
export function sortIndicator(sorted, order) {
  if (!sorted) return {ariaSort: 'none', mark: ''};
  return order === 'asc' ? {ariaSort: 'ascending', mark: '▲'} : {ariaSort: 'descending', mark: '▼'};
}
