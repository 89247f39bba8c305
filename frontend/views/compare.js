// The "Compare runs" view: the run chooser over one comparison's notices, summary cards,
// confidence check, charts and op table. It owns the comparison shown and keeps the table
// in step with the row view (narrowed, where asked, to the ops the check finds
// significantly changed); the server is asked again only for new runs and for `/regex/`
// matches.

import {breakdownCsvUrl, compareCsvUrl, fetchComparison, fetchRuns, prefetchPlotly} from '../api.js';
import {h} from '../dom.js';
import {MAX_TAB_ROWS, checkParams, hasRepeats, selectionParams, viewParams} from '../state.js';
import {applyView, isRegexQuery} from '../view.js';
import {TopOpsCharts} from './charts.js';
import {WaterfallChart} from './waterfall.js';
import {RunChooser} from './chooser.js';
import {ConfidencePanel, significantKeys} from './confidence.js';
import {RowFilters} from './filters.js';
import {comparisonNotices, listingNotices, runErrorsPanel} from './notices.js';
import {PageSkeleton} from './skeleton.js';
import {nextSort} from './sorting.js';
import {emptyLogdir, loadingIndicator, messageBox} from './states.js';
import {summaryCards} from './summary.js';
import {OpTable, isTextColumn} from './table.js';

/** @typedef {import('../contract.js').RunsDocument} RunsDocument */
/** @typedef {import('../contract.js').CompareDocument} CompareDocument */
/** @typedef {import('../contract.js').CompareSummary} CompareSummary */
/** @typedef {import('../contract.js').CheckDocument} CheckDocument */
/** @typedef {import('../api.js').ApiError} ApiError */
/** @typedef {import('../state.js').TabState} TabState */
/** @typedef {import('../state.js').Selection} Selection */
/** @typedef {import('../view.js').RowView} RowView */

/** @param {ApiError} error */
function comparisonFailed(error) {
  const unreadable = error.status === 422;
  const title = unreadable ? 'This profile cannot be read' : error.status === 404 ? 'Not found' : 'The comparison failed';
  return messageBox({kind: 'error', title, text: error.message, id: 'oc-message',
                     hint: unreadable ? 'Choose another run above; the other runs are not affected.' : null});
}

/**
 * Whether a side shows a capture other than its run's newest (the one the check reads).
 * @param {CompareSummary} summary
 */
function showsOlderSession(summary) {
  return [summary.baseline, summary.target].some((run) => run.session !== run.sessions[run.sessions.length - 1]);
}

export class CompareView {
  /**
   * @param {{state: TabState, onStateChange: () => void}} options `state`'s selection,
   *   view and significant flag are changed in place, then `onStateChange` runs
   */
  constructor({state, onStateChange}) {
    this.state = state;
    this.selection = state.selection;
    this.view = state.view;
    /** @type {string[]|null} the keys of the ops the check finds significantly changed; null: no check */
    this.significantKeys = null;
    this.onStateChange = onStateChange;
    this.element = h('div', {class: 'oc-compare'});
    this.table = new OpTable({onSort: (column) => this.sortBy(column)});
    /** @type {RunsDocument|null} */
    this.listing = null;
    /** @type {CompareDocument|null} */
    this.comparison = null;
    this.staleLink = null;
    this.suggestedFromNames = false; // the pair shown came from a listing that read no trace
    this.requestId = 0;
    this.refreshTicket = 0;
  }

  /**
   * List the runs and build the view; false when there is nothing to compare (the view
   * then says why).
   * @returns {Promise<boolean>}
   */
  async start() {
    this.element.replaceChildren(loadingIndicator('Finding profile runs…'));
    // plotly.js (4.8 MB) is downloaded now and run by the first chart drawn: run here, its
    // parse took the cores the server reads the runs with (2 cores: the headline 2 s later).
    prefetchPlotly();
    // First the listing that reads no trace (instant, even for a big logdir); the full
    // one, which fills in the facts of runs never read, follows in showComparison.
    let listing;
    try {
      listing = await fetchRuns({load: false});
      if (!listing.runs.length && !listing.complete) listing = await fetchRuns({load: true});
    } catch (error) {
      this.element.replaceChildren(messageBox({kind: 'error', title: 'Could not list the profile runs',
                                               text: error.message, id: 'oc-message'}));
      return false;
    }
    this.listing = listing;
    if (!listing.runs.length) {
      this.element.replaceChildren(runErrorsPanel(listing.errors) || '', emptyLogdir());
      return false;
    }
    this.chooseDefaultRuns();
    this.build();
    return true;
  }

  /**
   * Load the chosen comparison, and meanwhile the full listing if runs were never read. A
   * pair that the names alone suggested waits for the full listing: the data may pick
   * another (a run named for nothing that is the CPU one), and a number drawn for the
   * provisional pair would be replaced a moment later by another (issue 51: 0.14× for two
   * seconds, then 10.2×). A pair the user or the link chose is drawn at once.
   */
  async showComparison() {
    if (this.listing.complete) {
      await this.loadComparison();
      return;
    }
    const full = fetchRuns({load: true});
    if (this.suggestedFromNames) {
      const runs = this.listing.runs.length;
      this.skeleton.loading(`Reading the ${runs} ${runs === 1 ? 'run' : 'runs'} to find the pair to compare…`);
      try {
        this.takeListing(await full);
      } catch {
        this.settleListing(); // the names' pair stands: its comparison says what is wrong, if anything
      }
      if (!this.suggestedFromNames) return; // the user chose meanwhile: that choice is loading
      this.suggestedFromNames = false;
      await this.loadComparison();
      return;
    }
    const comparison = this.loadComparison();
    full.then((listing) => this.takeListing(listing)).catch(() => this.settleListing());
    await comparison;
  }

  /** No full listing will come (its request failed): the chooser stops saying it looks for pairs. */
  settleListing() {
    this.listing = {...this.listing, complete: true};
    this.chooser.setListing(this.listing);
    this.chooser.showSelection(this.selection);
  }

  /**
   * The full listing in place of the one read from names: the chooser's runs and pairs,
   * the unreadable runs, the notices, and the suggested pair where the names chose it.
   * @param {Object} full the runs document with every run read
   */
  takeListing(full) {
    this.listing = full;
    this.chooser.setListing(full);
    this.errorsSlot.replaceChildren(runErrorsPanel(full.errors) || '');
    this.showListingNotices();
    const suggested = full.suggested;
    if (this.suggestedFromNames && suggested) {
      Object.assign(this.selection, {baseline: suggested.baseline, target: suggested.target,
                                     baseline_session: null, target_session: null});
    }
    this.chooser.showSelection(this.selection);
  }

  chooseDefaultRuns() {
    const {runs, errors, suggested} = this.listing;
    // Unreadable runs count as known: a link to one shows why it cannot be read.
    const known = new Set([...runs, ...errors].map((entry) => entry.run));
    const valid = known.has(this.selection.baseline) && known.has(this.selection.target);
    if (this.selection.baseline && !valid) {
      this.staleLink = `This link names runs that are not in this logdir (${this.selection.baseline} → ` +
        `${this.selection.target}); showing the suggested pair instead.`;
    }
    if (valid) return;
    // Without the link's pair the data decides, once read: the names' pair (or none) is provisional.
    this.suggestedFromNames = !this.listing.complete;
    if (!suggested) return;
    Object.assign(this.selection, {baseline: suggested.baseline, target: suggested.target,
                                   baseline_session: null, target_session: null});
  }

  build() {
    this.chooser = new RunChooser({onChange: (changes) => {
      this.suggestedFromNames = false; // the user's choice: the full listing leaves it alone
      this.setSelection(changes);
    }});
    this.notices = h('div', {class: 'oc-notices'});
    this.summary = h('section', {class: 'oc-summary', 'aria-label': 'summary'});
    this.confidence = new ConfidencePanel({onCheck: (check) => this.showCheck(check)});
    this.charts = new TopOpsCharts();
    this.waterfall = new WaterfallChart();
    this.filters = new RowFilters(this.view, {
      onViewChange: (changes) => this.setView(changes),
      checkQuery: async (query) => (await this.regexMatch(query))?.error,
      significant: this.state.significant,
      onSignificantChange: (significant) => {
        this.state.significant = significant;
        this.refreshRows();
      },
    });
    this.errorsSlot = h('div', {class: 'oc-errors-slot'}, runErrorsPanel(this.listing.errors) || '');
    this.listingNoticesSlot = h('div', {class: 'oc-listing-notices'});
    this.footer = h('footer', {class: 'oc-footer', id: 'oc-version'});
    this.content = h('div', {class: 'oc-content'}, this.notices, this.summary, this.waterfall.element,
                     this.confidence.element, this.charts.element, this.filters.element, this.table.element);
    // The export link is the filters' (its href follows the row view): it shows with the content.
    this.skeleton = new PageSkeleton({body: this.content, loadingText: ''}); // its text names the runs read
    this.element.replaceChildren(this.chooser.element, this.errorsSlot, this.listingNoticesSlot, this.skeleton.message,
                                 this.skeleton.element, this.footer);
    this.showListingNotices();
    this.chooser.setListing(this.listing);
    this.chooser.showSelection(this.selection);
  }

  showListingNotices() {
    this.listingNoticesSlot.replaceChildren(...listingNotices(this.listing.notices || []));
    this.footer.textContent = this.listing.version ? `tb-opcompare ${this.listing.version}` : '';
  }

  /** @param {Partial<Selection>} changes */
  setSelection(changes) {
    Object.assign(this.selection, changes);
    this.chooser.showSelection(this.selection);
    this.loadComparison();
  }

  /** @param {Partial<RowView>} changes */
  setView(changes) {
    Object.assign(this.view, changes);
    this.refreshRows();
  }

  /**
   * The check's verdicts: beside the speedups, and the keys "significant changes only"
   * narrows the table to.
   * @param {CheckDocument|null} check
   */
  showCheck(check) {
    this.table.setCheck(check);
    this.significantKeys = check ? significantKeys(check) : null;
    this.filters.showSignificant(check ? {keys: this.significantKeys} : null);
    if (this.state.significant) this.refreshRows();
  }

  /**
   * The row view the table shows: the user's, narrowed to the significant ops where that
   * is asked for and the check has some (the checkbox is disabled otherwise).
   * @returns {RowView}
   */
  shownView() {
    const keys = this.state.significant && this.significantKeys?.length ? this.significantKeys : null;
    return keys ? {...this.view, keys} : this.view;
  }

  /**
   * Whether the comparison pools each run with its repeats: asked for ("Pool repeats"),
   * and either run has some (the checkbox is disabled otherwise).
   */
  pooled() {
    return Boolean(this.selection.repeats) && hasRepeats(this.selection, this.listing?.runs || []);
  }

  /** The compare route's run parameters for the comparison shown (and its CSV's). */
  runParams() {
    return selectionParams(this.selection, this.pooled());
  }

  sortBy(column) {
    const {order} = nextSort({column: this.view.sort, order: this.view.order}, column, isTextColumn(column));
    this.setView({sort: column, order});
  }

  /**
   * The server's matches for a `/regex/` query, fetched once per query and comparison;
   * null for a plain query.
   * @param {string} query
   * @returns {Promise<{keys: Set<string>, error: string|null}|null>}
   */
  async regexMatch(query) {
    if (!isRegexQuery(query) || !this.comparison || this.capped()) return null;
    const runs = this.runParams();
    const key = `${query}\n${JSON.stringify(runs)}`;
    if (this.regexMatchCache?.key !== key) {
      try {
        const matched = await fetchComparison({...runs, q: query});
        this.regexMatchCache = {key, keys: new Set(matched.rows.map((row) => row.key)), error: null};
      } catch (error) {
        this.regexMatchCache = {key, keys: new Set(), error: error.message};
      }
    }
    return this.regexMatchCache;
  }

  async loadComparison() {
    const id = ++this.requestId;
    const {baseline, target} = this.selection;
    if (!baseline || !target) { // no pair suggested (one device, one batch size): the user picks
      this.comparison = null;
      this.skeleton.showMessage(messageBox({
        kind: 'note', title: 'Choose two runs to compare', id: 'oc-message',
        text: 'No pair of runs suggests itself in this logdir: pick a baseline and a target above.'}));
      this.onStateChange();
      return;
    }
    this.skeleton.loading(`Reading ${baseline} and ${target}${this.pooled() ? ', each with its repeats' : ''}…`);
    let comparison;
    try {
      comparison = await fetchComparison({...this.runParams(), top: String(MAX_TAB_ROWS)});
    } catch (error) {
      if (id !== this.requestId) return; // a newer choice is loading
      this.comparison = null;
      this.skeleton.showMessage(comparisonFailed(error));
      this.onStateChange();
      return;
    }
    if (id !== this.requestId) return;
    this.skeleton.loaded();
    this.comparison = comparison;
    this.notices.replaceChildren(...comparisonNotices(comparison.summary, this.staleLink));
    this.summary.replaceChildren(...summaryCards(comparison.summary));
    this.waterfall.show(comparison.summary, breakdownCsvUrl(this.runParams()));
    // Before the rows: the table drops the last pair's verdicts until this pair's arrive.
    this.confidence.show(checkParams(this.selection), {olderSession: showsOlderSession(comparison.summary),
                                                       refusal: comparison.summary.check_refusal});
    this.charts.show(comparison);
    this.refreshRows();
  }

  /** Whether the comparison has more rows than the tab holds (MAX_TAB_ROWS). */
  capped() {
    return Boolean(this.comparison) && this.comparison.total_rows > this.comparison.rows.length;
  }

  async refreshRows() {
    this.onStateChange();
    if (!this.comparison) return;
    const comparison = this.comparison;
    const ticket = ++this.refreshTicket;
    const view = this.shownView();
    // the server narrows the file to the significant ops itself: their keys in the link
    // would pass the length of a request line on a large model
    const narrowed = view.keys ? {significant: '1'} : {};
    const exportUrl = compareCsvUrl({...this.runParams(), ...viewParams(this.view), ...narrowed});
    if (this.capped()) {
      // A comparison bigger than the tab holds is filtered and ordered by the server, on
      // every row, and the tab shows the first MAX_TAB_ROWS of the result (the CSV has all).
      let shown;
      try {
        const {keys, ...rest} = view;
        shown = await fetchComparison({...this.runParams(), ...viewParams(rest), ...narrowed,
                                       top: String(Math.min(view.top || MAX_TAB_ROWS, MAX_TAB_ROWS))});
      } catch (error) {
        if (ticket !== this.refreshTicket) return;
        this.filters.showQueryError(error.message);
        return;
      }
      if (ticket !== this.refreshTicket || comparison !== this.comparison) return;
      this.filters.showQueryError(null);
      this.table.setRows(shown.rows, view, comparison.rows);
      this.filters.showRows(shown.rows.length, comparison.total_rows, exportUrl, shown.view_rows);
      return;
    }
    const match = await this.regexMatch(this.view.q);
    if (ticket !== this.refreshTicket || comparison !== this.comparison) return; // a newer refresh is under way
    this.filters.showQueryError(match?.error);
    const rows = applyView(comparison.rows, view, match?.keys);
    this.table.setRows(rows, view, comparison.rows);
    this.filters.showRows(rows.length, comparison.rows.length, exportUrl);
  }

  redrawCharts() {
    if (this.comparison) {
      this.charts.show(this.comparison);
      this.waterfall.show(this.comparison.summary);
    }
    this.confidence?.redraw();
  }
}
