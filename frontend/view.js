// Which compare rows the user sees, and in which order. This mirrors the server's row
// view (view_from_params / apply_view) exactly, so compare.csv with the same view
// parameters is the table on screen, row for row; tests/golden/view_cases.json holds
// both copies to the same answers.

/** @typedef {import('./contract.js').CompareRow} CompareRow */

/**
 * @typedef {Object} RowView
 * @property {string} q substring of the op key or type (any case), or a `/regex/`
 * @property {string[]} status the statuses to keep, never empty
 * @property {'all'|'host'|'device'} side keep ops whose time came from that processor, in the baseline or the target
 * @property {number} min_us keep ops whose larger total time (either side) is at least this
 * @property {string|null} sort column to order by; null keeps the server's order
 * @property {'asc'|'desc'} order
 * @property {number|null} top keep the first N after filtering and sorting
 * @property {string[]|null} keys keep only the rows of these op keys; null (or none)
 *   keeps every key
 */

export const STATUSES = ['matched', 'baseline_only', 'target_only'];

/** A `/regex/` query: matched by the server (RE2, linear time), never by the browser,
 *  whose RegExp can backtrack for hours on a pathological pattern from a shared link. */
export function isRegexQuery(query) {
  return query.length > 2 && query.startsWith('/') && query.endsWith('/');
}

/**
 * A matcher for the filter box: substring (case-insensitive), or for a regex query the
 * set of row keys the server matched.
 * @param {string} query
 * @param {Set<string>|null} regexKeys
 * @returns {(row: CompareRow) => boolean}
 */
export function queryMatcher(query, regexKeys) {
  if (isRegexQuery(query)) return (row) => Boolean(regexKeys && regexKeys.has(row.key));
  const needle = query.toLowerCase();
  return (row) => row.key.toLowerCase().includes(needle) || (row.op_type || '').toLowerCase().includes(needle);
}

function compareValues(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Rows ordered by one column, missing values (null, undefined) last in either direction,
 * ties in their given order.
 * @template {Object} Row
 * @param {Row[]} rows
 * @param {string} column
 * @param {'asc'|'desc'} order
 * @returns {Row[]}
 */
export function sortMissingLast(rows, column, order) {
  const isMissing = (row) => row[column] === null || row[column] === undefined;
  const direction = order === 'asc' ? 1 : -1;
  const present = rows.filter((row) => !isMissing(row));
  present.sort((a, b) => direction * compareValues(a[column], b[column]));
  return present.concat(rows.filter(isMissing));
}

/**
 * @param {CompareRow[]} rows
 * @param {RowView} view
 * @param {Set<string>|null} [regexKeys] for a `/regex/` query: the keys the server matched
 * @returns {CompareRow[]}
 */
export function applyView(rows, view, regexKeys = null) {
  const matches = view.q ? queryMatcher(view.q, regexKeys) : null;
  const statuses = new Set(view.status && view.status.length ? view.status : STATUSES);
  const keys = view.keys && view.keys.length ? new Set(view.keys) : null;
  const kept = rows.filter((row) => {
    if (keys && !keys.has(row.key)) return false;
    if (!statuses.has(row.status)) return false;
    if (matches && !matches(row)) return false;
    const sources = [row.baseline_time_source, row.target_time_source];
    const either = (source) => sources.includes(source) || sources.includes('mixed');
    if (view.side === 'host' && !either('host')) return false;
    if (view.side === 'device' && !either('device')) return false;
    if (view.min_us) {
      const largest = Math.max(row.baseline_total_us || 0, row.target_total_us || 0);
      if (largest < view.min_us) return false;
    }
    return true;
  });
  const ordered = view.sort ? sortMissingLast(kept, view.sort, view.order) : kept;
  return view.top ? ordered.slice(0, view.top) : ordered;
}
