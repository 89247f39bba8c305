// Which compare rows the user sees, and in which order. This mirrors
// tb_opcompare.documents.apply_view exactly, so compare.csv with the same view
// parameters is the table on screen, row for row.

export const STATUSES = ['matched', 'baseline_only', 'target_only'];

/** A `/regex/` query: matched by the server (RE2, linear time), never by the browser,
 *  whose RegExp can backtrack for hours on a pathological pattern from a shared link. */
export function isRegexQuery(query) {
  return query.length > 2 && query.startsWith('/') && query.endsWith('/');
}

/** A matcher for the filter box: substring (case-insensitive), or for a regex query the
 *  set of row keys the server matched (`regexKeys`). */
export function queryMatcher(query, regexKeys) {
  if (isRegexQuery(query)) return (row) => Boolean(regexKeys && regexKeys.has(row.key));
  const needle = query.toLowerCase();
  return (row) => row.key.toLowerCase().includes(needle) || (row.op_type || '').toLowerCase().includes(needle);
}

function compareValues(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * view: {q, status: [..], side: 'all'|'host'|'device', min_us: number, sort: column|null,
 *        order: 'asc'|'desc', top: number|null}; regexKeys: see queryMatcher
 */
export function applyView(rows, view, regexKeys = null) {
  const matches = view.q ? queryMatcher(view.q, regexKeys) : null;
  const statuses = new Set(view.status && view.status.length ? view.status : STATUSES);
  const kept = rows.filter((row) => {
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
  let ordered = kept;
  if (view.sort) {
    const column = view.sort;
    const present = kept.filter((row) => row[column] !== null && row[column] !== undefined);
    const missing = kept.filter((row) => row[column] === null || row[column] === undefined);
    const direction = view.order === 'asc' ? 1 : -1;
    present.sort((a, b) => direction * compareValues(a[column], b[column]));
    ordered = present.concat(missing);
  }
  return view.top ? ordered.slice(0, view.top) : ordered;
}
