// The Op Compare tab. TensorBoard loads this module in the plugin's iframe (base URL
// /data/plugin/op_compare/) and calls render(). No build step: plain ES modules.

import {formatCount, formatShare, formatSpeedup, formatTime, h, parseTime, plotlyText,
        truncateMiddle} from './format.js';
import {SweepView} from './sweep.js';
import {followTheme, themedLayout} from './theme.js';
import {OpTable} from './table.js';
import {STATUSES, applyView, isRegexQuery} from './view.js';

const HASH_PREFIX = 'p.op_compare.';
const SELECTION_KEYS = ['baseline', 'target', 'baseline_session', 'target_session', 'group_by'];
const TEXT_COLUMNS = new Set(['key', 'op_type', 'status']);
const STATUS_LABELS = {matched: 'Matched', baseline_only: 'Baseline only', target_only: 'Target only'};
const SIDE_COLOURS = {baseline: '#1976d2', target: '#f57c00'};

// ---------------------------------------------------------------------------------
// URL hash: TensorBoard's own hash (#op_compare) carries the state, with keys prefixed
// "p.op_compare." as TensorBoard's plugin library does, so reload and shared links
// restore the view. Inside a frame we cannot reach, the frame's own hash is used.

function hashWindow() {
  try {
    void window.parent.location.hash;
    return window.parent;
  } catch (error) {
    return window;
  }
}

function readHash() {
  const parts = hashWindow().location.hash.replace(/^#/, '').split('&');
  const state = {};
  for (const part of parts) {
    const separator = part.indexOf('=');
    if (separator < 0) continue;
    const key = decodeURIComponent(part.slice(0, separator));
    if (key.startsWith(HASH_PREFIX)) state[key.slice(HASH_PREFIX.length)] = decodeURIComponent(part.slice(separator + 1));
  }
  return state;
}

function writeHash(params) {
  const host = hashWindow();
  const kept = host.location.hash.replace(/^#/, '').split('&')
    .filter((part) => part && !decodeURIComponent(part.split('=')[0]).startsWith(HASH_PREFIX));
  if (host === window.parent && !kept.length) kept.push('op_compare');
  for (const [key, value] of Object.entries(params)) {
    kept.push(`${encodeURIComponent(HASH_PREFIX + key)}=${encodeURIComponent(value)}`);
  }
  const hash = `#${kept.join('&')}`;
  if (host.location.hash !== hash) host.history.replaceState(host.history.state, '', hash);
}

// ---------------------------------------------------------------------------------

async function fetchJson(url) {
  let response;
  try {
    response = await fetch(url, {headers: {Accept: 'application/json'}});
  } catch (error) {
    throw {status: 0, message: `TensorBoard did not answer (${error.message}); is it still running?`};
  }
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    throw {status: response.status, message: `unexpected answer from TensorBoard (HTTP ${response.status})`};
  }
  if (!response.ok) throw body.error || {status: response.status, message: `HTTP ${response.status}`};
  return body;
}

let plotlyPromise = null;

function loadPlotly() {
  if (!plotlyPromise) {
    plotlyPromise = new Promise((resolve, reject) => {
      const script = h('script', {src: 'plotly.min.js'});
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error('plotly.min.js could not be loaded'));
      document.head.append(script);
    });
  }
  return plotlyPromise;
}

function runLabel(run) {
  const parts = [run.run, run.device || 'device unknown'];
  if (run.batch_size) parts.push(`bs ${run.batch_size}`);
  if (!run.loaded) parts.push('not read yet');
  return parts.join(' · ');
}

function deviceText(run) {
  return run.device_name ? `${run.device} · ${run.device_name}` : run.device;
}

class OpCompareApp {
  constructor(root) {
    this.root = root;
    this.runs = [];
    this.pairs = [];
    this.runErrors = [];
    this.document = null;
    this.shownRows = [];
    this.requestId = 0;
    const hash = readHash();
    this.selection = Object.fromEntries(SELECTION_KEYS.map((key) => [key, hash[key] || null]));
    this.selection.group_by = hash.group_by === 'type' ? 'type' : 'name';
    this.view = {
      q: hash.q || '',
      status: hash.status ? hash.status.split(',').filter((s) => STATUSES.includes(s)) : [...STATUSES],
      side: ['host', 'device'].includes(hash.side) ? hash.side : 'all',
      min_us: parseFloat(hash.min_us) > 0 ? parseFloat(hash.min_us) : 0,
      sort: hash.sort || null,
      order: hash.order === 'asc' ? 'asc' : 'desc',
      top: parseInt(hash.top, 10) > 0 ? parseInt(hash.top, 10) : null,
    };
    if (!this.view.status.length) this.view.status = [...STATUSES];
    this.table = new OpTable({onSort: (column) => this.sortBy(column)});
    this.page = hash.view === 'sweep' ? 'sweep' : 'compare';
    this.sweep = new SweepView({
      fetchJson, loadPlotly, onStateChange: () => this.syncHash(),
      state: {model: hash.model || null, top: parseInt(hash.sweep_top, 10) > 0 ? parseInt(hash.sweep_top, 10) : 10,
              group_by: hash.sweep_group_by === 'type' ? 'type' : 'name'},
    });
  }

  /** The two views, "Compare runs" and "Batch sweep", under one tab. */
  buildFrame(outer) {
    this.pageButtons = [['compare', 'Compare runs'], ['sweep', 'Batch sweep']].map(([page, label]) =>
      h('button', {class: 'oc-page-tab', type: 'button', 'data-page': page, role: 'tab',
                   onclick: () => this.showPage(page)}, label));
    this.sweep.element.hidden = true;
    outer.replaceChildren(h('nav', {class: 'oc-page-tabs', role: 'tablist'}, this.pageButtons), this.root,
                          this.sweep.element);
  }

  showPage(page) {
    this.page = page;
    for (const button of this.pageButtons) {
      button.classList.toggle('oc-active', button.dataset.page === page);
      button.setAttribute('aria-selected', String(button.dataset.page === page));
    }
    this.root.hidden = page !== 'compare';
    this.sweep.element.hidden = page !== 'sweep';
    this.syncHash();
    if (page === 'sweep') this.sweep.show();
  }

  async start(outer) {
    this.buildFrame(outer);
    if (this.page === 'sweep') this.showPage('sweep');
    this.showLoading('Finding profile runs…');
    loadPlotly().catch(() => {});
    // First the listing that reads no trace (instant, even for a big logdir); then, if
    // some runs were never read, the full one in the background, to fill in their facts.
    let listing;
    try {
      listing = await fetchJson('runs?load=0');
      if (!listing.runs.length && !listing.complete) listing = await fetchJson('runs');
    } catch (error) {
      this.showMessage('error', 'Could not list the profile runs', error.message);
      return;
    }
    this.setListing(listing);
    if (!this.runs.length) {
      this.showEmptyState();
      return;
    }
    this.chooseDefaultRuns();
    this.buildPage();
    this.showPage(this.page);
    const comparison = this.loadComparison();
    if (!listing.complete) {
      fetchJson('runs').then((full) => {
        this.setListing(full);
        this.fillRunOptions();
        this.errorsSlot.replaceChildren(this.runErrorsPanel() || '');
        this.fillListingNotices();
        this.fillChooser();
      }).catch(() => {});
    }
    await comparison;
  }

  setListing(listing) {
    this.runs = listing.runs;
    this.pairs = listing.pairs;
    this.runErrors = listing.errors;
    this.suggested = listing.suggested;
    this.listingNotices = listing.notices || [];
    this.version = listing.version;
  }

  chooseDefaultRuns() {
    // Unreadable runs count as known: a link to one shows why it cannot be read.
    const known = new Set([...this.runs, ...this.runErrors].map((entry) => entry.run));
    const valid = known.has(this.selection.baseline) && known.has(this.selection.target);
    if (this.selection.baseline && !valid) {
      this.staleLink = `This link names runs that are not in this logdir (${this.selection.baseline} → ` +
        `${this.selection.target}); showing the suggested pair instead.`;
    }
    if (valid || !this.suggested) return;
    this.selection.baseline_session = null;
    this.selection.target_session = null;
    this.selection.baseline = this.suggested.baseline;
    this.selection.target = this.suggested.target;
  }

  runByName(name) {
    return this.runs.find((run) => run.run === name);
  }

  // ------------------------------------------------------------------ page skeleton

  buildPage() {
    this.pairSelect = h('select', {class: 'oc-select', 'aria-label': 'suggested pair',
                                   onchange: () => this.choosePair(this.pairSelect.value)});
    this.baselineSelect = this.runSelect('baseline');
    this.targetSelect = this.runSelect('target');
    this.baselineSession = this.sessionSelect('baseline');
    this.targetSession = this.sessionSelect('target');
    this.groupButtons = ['name', 'type'].map((groupBy) =>
      h('button', {class: 'oc-segment', 'data-group-by': groupBy, type: 'button',
                   onclick: () => this.setSelection({group_by: groupBy})},
        groupBy === 'name' ? 'By op name' : 'By op type'));

    const chooser = h('section', {class: 'oc-chooser', 'aria-label': 'runs to compare'},
      h('label', {class: 'oc-field oc-field-pair'}, h('span', {class: 'oc-label'}, 'Suggested pair'), this.pairSelect),
      h('div', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Baseline'),
        h('div', {class: 'oc-inline'}, this.baselineSelect, this.baselineSession)),
      h('button', {class: 'oc-icon-button', id: 'oc-swap', type: 'button', title: 'Swap baseline and target',
                   'aria-label': 'swap baseline and target', onclick: () => this.swap()}, '⇄'),
      h('div', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Target'),
        h('div', {class: 'oc-inline'}, this.targetSelect, this.targetSession)),
      h('div', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Group'),
        h('div', {class: 'oc-segments'}, this.groupButtons)));

    this.summary = h('section', {class: 'oc-summary', 'aria-label': 'summary'});
    this.notices = h('div', {class: 'oc-notices'});
    this.charts = {
      baseline: h('div', {class: 'oc-chart', id: 'oc-chart-baseline'}),
      target: h('div', {class: 'oc-chart', id: 'oc-chart-target'}),
    };
    this.chartTitles = {baseline: h('h3', {}), target: h('h3', {})};
    const charts = h('section', {class: 'oc-charts', 'aria-label': 'top ops'},
      h('div', {class: 'oc-card oc-chart-card'}, this.chartTitles.baseline, this.charts.baseline),
      h('div', {class: 'oc-card oc-chart-card'}, this.chartTitles.target, this.charts.target));

    this.filterInput = h('input', {class: 'oc-input oc-filter', id: 'oc-filter', type: 'search', value: this.view.q,
                                   placeholder: 'Filter ops: name or type, or /regex/', 'aria-label': 'filter ops',
                                   oninput: () => this.onFilterInput()});
    this.statusBoxes = STATUSES.map((status) => h('input', {type: 'checkbox', value: status,
      checked: this.view.status.includes(status), onchange: () => this.onStatusChange()}));
    this.sideSelect = h('select', {class: 'oc-select', id: 'oc-side', 'aria-label': 'host or device ops',
                                   onchange: () => this.setView({side: this.sideSelect.value})},
      h('option', {value: 'all'}, 'Host and device'), h('option', {value: 'host'}, 'Host ops'),
      h('option', {value: 'device'}, 'Device ops'));
    this.sideSelect.value = this.view.side;
    this.minInput = h('input', {class: 'oc-input oc-short', id: 'oc-min', placeholder: 'e.g. 1ms',
                                value: this.view.min_us ? `${this.view.min_us}us` : '',
                                'aria-label': 'minimum total time', oninput: () => this.onMinInput()});
    this.topInput = h('input', {class: 'oc-input oc-short', id: 'oc-top', type: 'number', min: 1, placeholder: 'all',
                                value: this.view.top || '', 'aria-label': 'top N ops',
                                oninput: () => this.onTopInput()});
    this.count = h('span', {class: 'oc-count', id: 'oc-count', 'aria-live': 'polite'});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-export', download: '', href: '#'}, 'Export CSV');
    const filters = h('section', {class: 'oc-filters', 'aria-label': 'filters'},
      this.filterInput,
      h('div', {class: 'oc-checks'}, STATUSES.map((status, i) =>
        h('label', {class: 'oc-check'}, this.statusBoxes[i], STATUS_LABELS[status]))),
      this.sideSelect,
      h('label', {class: 'oc-inline-label'}, 'Min total', this.minInput),
      h('label', {class: 'oc-inline-label'}, 'Top', this.topInput),
      h('span', {class: 'oc-spacer-flex'}),
      this.count, this.exportLink);

    this.errorsSlot = h('div', {class: 'oc-errors-slot'}, this.runErrorsPanel() || '');
    this.listingNoticesSlot = h('div', {class: 'oc-listing-notices'});
    this.footer = h('footer', {class: 'oc-footer', id: 'oc-version'});
    this.content = h('div', {class: 'oc-content'}, this.notices, this.summary, charts, filters, this.table.element);
    this.overlay = h('div', {class: 'oc-loading', hidden: true}, h('div', {class: 'oc-spinner'}),
                     h('span', {class: 'oc-loading-text'}));
    this.messagePanel = h('div', {class: 'oc-message-slot'});
    this.root.replaceChildren(chooser, this.errorsSlot, this.listingNoticesSlot, this.messagePanel,
                              h('div', {class: 'oc-body'}, this.content, this.overlay), this.footer);
    this.fillListingNotices();
    this.fillRunOptions();
    this.fillChooser();
  }

  runSelect(side) {
    const select = h('select', {class: 'oc-select oc-run', id: `oc-${side}`, 'aria-label': `${side} run`,
                                onchange: () => this.setSelection({[side]: select.value, [`${side}_session`]: null})});
    return select;
  }

  fillRunOptions() {
    for (const select of [this.baselineSelect, this.targetSelect]) {
      select.replaceChildren(
        ...this.runs.map((run) => h('option', {value: run.run}, runLabel(run))),
        ...this.runErrors.map((error) => h('option', {value: error.run, disabled: true}, `${error.run} · unreadable`)));
    }
  }

  sessionSelect(side) {
    const select = h('select', {class: 'oc-select oc-session', id: `oc-${side}-session`,
                                'aria-label': `${side} session`,
                                onchange: () => this.setSelection({[`${side}_session`]: select.value})});
    return select;
  }

  fillChooser() {
    const {baseline, target} = this.selection;
    const pairOptions = this.pairs.map((pair, index) =>
      h('option', {value: String(index)},
        `${pair.baseline} → ${pair.target}` + (pair.guess ? ' (a guess: batch sizes unknown)' : '')));
    const current = this.pairs.findIndex((pair) => pair.baseline === baseline && pair.target === target);
    this.pairSelect.replaceChildren(
      h('option', {value: 'custom'}, this.pairs.length ? 'Custom (choose below)' : 'No CPU↔GPU pairs found'),
      ...pairOptions);
    this.pairSelect.value = current >= 0 ? String(current) : 'custom';
    this.baselineSelect.value = baseline;
    this.targetSelect.value = target;
    for (const side of ['baseline', 'target']) {
      const run = this.runByName(this.selection[side]);
      const select = side === 'baseline' ? this.baselineSession : this.targetSession;
      const sessions = run ? [...run.sessions].reverse() : [];
      select.replaceChildren(...sessions.map((session, i) =>
        h('option', {value: session}, i === 0 ? `${session} (newest)` : session)));
      select.value = this.selection[`${side}_session`] || sessions[0] || '';
      select.hidden = sessions.length < 2;
    }
    for (const button of this.groupButtons) {
      button.classList.toggle('oc-active', button.dataset.groupBy === this.selection.group_by);
      button.setAttribute('aria-pressed', String(button.dataset.groupBy === this.selection.group_by));
    }
  }

  /** Notices about the logdir as a whole (e.g. no accelerator run), and the version. */
  fillListingNotices() {
    this.listingNoticesSlot.replaceChildren(...this.listingNotices.map((notice) =>
      h('div', {class: 'oc-panel oc-panel-note', id: 'oc-no-accelerator'}, notice)));
    this.footer.textContent = this.version ? `tb-opcompare ${this.version}` : '';
  }

  runErrorsPanel() {
    if (!this.runErrors.length) return null;
    const count = this.runErrors.length;
    return h('details', {class: 'oc-panel oc-panel-warning', id: 'oc-run-errors'},
      h('summary', {}, `${count} profile ${count === 1 ? 'run' : 'runs'} could not be read (the others are shown)`),
      h('ul', {}, this.runErrors.map((error) =>
        h('li', {}, h('code', {}, error.path), ': ', error.message))));
  }

  // ------------------------------------------------------------------ interactions

  choosePair(value) {
    if (value === 'custom') return;
    const pair = this.pairs[Number(value)];
    this.setSelection({baseline: pair.baseline, target: pair.target, baseline_session: null, target_session: null});
  }

  swap() {
    const {baseline, target, baseline_session: baselineSession, target_session: targetSession} = this.selection;
    this.setSelection({baseline: target, target: baseline, baseline_session: targetSession,
                       target_session: baselineSession});
  }

  setSelection(changes) {
    Object.assign(this.selection, changes);
    this.fillChooser();
    this.loadComparison();
  }

  setView(changes) {
    Object.assign(this.view, changes);
    this.refreshRows();
  }

  sortBy(column) {
    if (this.view.sort === column) {
      this.setView({order: this.view.order === 'asc' ? 'desc' : 'asc'});
    } else {
      this.setView({sort: column, order: TEXT_COLUMNS.has(column) ? 'asc' : 'desc'});
    }
  }

  onFilterInput() {
    clearTimeout(this.filterTimer);
    this.filterTimer = setTimeout(async () => {
      const query = this.filterInput.value;
      const match = await this.regexKeys(query);
      if (query !== this.filterInput.value) return; // typed on meanwhile
      this.showQueryError(match?.error);
      if (!match?.error) this.setView({q: query}); // an invalid regex changes nothing
    }, 120);
  }

  showQueryError(error) {
    this.filterInput.classList.toggle('oc-invalid', Boolean(error));
    this.filterInput.title = error || '';
  }

  /** The server's matches for a `/regex/` filter, fetched once per query and comparison. */
  async regexKeys(query) {
    if (!isRegexQuery(query) || !this.document) return null;
    const key = `${query}\n${JSON.stringify(this.selectionParams())}`;
    if (this.regexMatch?.key !== key) {
      const params = new URLSearchParams({...this.selectionParams(), q: query});
      try {
        const matched = await fetchJson(`compare?${params}`);
        this.regexMatch = {key, keys: new Set(matched.rows.map((row) => row.key)), error: null};
      } catch (error) {
        this.regexMatch = {key, keys: new Set(), error: error.message};
      }
    }
    return this.regexMatch;
  }

  onStatusChange() {
    const chosen = this.statusBoxes.filter((box) => box.checked).map((box) => box.value);
    this.setView({status: chosen.length ? chosen : [...STATUSES]});
  }

  onMinInput() {
    const text = this.minInput.value.trim();
    const value = text ? parseTime(text) : 0;
    this.minInput.classList.toggle('oc-invalid', value === null);
    if (value !== null) this.setView({min_us: value});
  }

  onTopInput() {
    const value = parseInt(this.topInput.value, 10);
    this.setView({top: value > 0 ? value : null});
  }

  // ------------------------------------------------------------------ data

  selectionParams() {
    const params = {baseline: this.selection.baseline, target: this.selection.target,
                    group_by: this.selection.group_by};
    if (this.selection.baseline_session) params.baseline_session = this.selection.baseline_session;
    if (this.selection.target_session) params.target_session = this.selection.target_session;
    return params;
  }

  viewParams() {
    const params = {};
    if (this.view.q) params.q = this.view.q;
    if (this.view.status.length < STATUSES.length) params.status = this.view.status.join(',');
    if (this.view.side !== 'all') params.side = this.view.side;
    if (this.view.min_us) params.min_us = String(this.view.min_us);
    if (this.view.sort) {
      params.sort = this.view.sort;
      params.order = this.view.order;
    }
    if (this.view.top) params.top = String(this.view.top);
    return params;
  }

  async loadComparison() {
    const id = ++this.requestId;
    const {baseline, target} = this.selection;
    this.showLoading(`Reading ${baseline} and ${target}…`);
    this.messagePanel.replaceChildren();
    let comparison;
    try {
      comparison = await fetchJson(`compare?${new URLSearchParams(this.selectionParams())}`);
    } catch (error) {
      if (id !== this.requestId) return;
      this.hideLoading();
      this.document = null;
      this.content.hidden = true;
      const title = error.status === 422 ? 'This profile cannot be read' :
        error.status === 404 ? 'Not found' : 'The comparison failed';
      this.messagePanel.replaceChildren(this.messageBox('error', title, error.message,
        error.status === 422 ? 'Choose another run above; the other runs are not affected.' : null));
      this.syncHash();
      return;
    }
    if (id !== this.requestId) return;
    this.hideLoading();
    this.content.hidden = false;
    this.document = comparison;
    this.renderNotices();
    this.renderSummary();
    this.renderCharts();
    this.refreshRows();
  }

  async refreshRows() {
    this.syncHash();
    if (!this.document) return;
    const document = this.document;
    const ticket = this.refreshTicket = (this.refreshTicket || 0) + 1;
    const match = await this.regexKeys(this.view.q);
    if (ticket !== this.refreshTicket || document !== this.document) return; // a newer refresh is under way
    this.showQueryError(match?.error);
    const total = document.rows.length;
    this.shownRows = applyView(document.rows, this.view, match?.keys);
    this.table.setRows(this.shownRows, this.view.sort, this.view.order);
    this.count.textContent = `Showing ${formatCount(this.shownRows.length)} of ${formatCount(total)} ops`;
    const params = new URLSearchParams({...this.selectionParams(), ...this.viewParams()});
    this.exportLink.href = `compare.csv?${params}`;
  }

  syncHash() {
    const params = this.selection.baseline ? {...this.selectionParams(), ...this.viewParams()} : {};
    if (params.group_by === 'name') delete params.group_by;
    if (this.page === 'sweep') params.view = 'sweep';
    const sweep = this.sweep.state;
    if (sweep.model) params.model = sweep.model;
    if (sweep.top !== 10) params.sweep_top = String(sweep.top);
    if (sweep.group_by !== 'name') params.sweep_group_by = sweep.group_by;
    writeHash(params);
  }

  // ------------------------------------------------------------------ rendering

  renderNotices() {
    const {summary} = this.document;
    const notes = [];
    if (this.staleLink) notes.push(this.staleLink);
    notes.push(...(summary.notes || []));
    for (const side of ['baseline', 'target']) {
      for (const warning of summary[side].warnings) notes.push(`${summary[side].run}: ${warning}`);
    }
    if (summary.baseline.run === summary.target.run && summary.baseline.session === summary.target.session) {
      notes.push('Baseline and target are the same capture: every speedup is 1×.');
    }
    this.notices.replaceChildren(...notes.map((note) => h('div', {class: 'oc-panel oc-panel-note'}, note)));
  }

  renderSummary() {
    const {summary} = this.document;
    const base = summary.baseline;
    const tgt = summary.target;
    const speedupCard = (title, value, detail, id) => {
      const figure = h('div', {class: 'oc-figure', id}, formatSpeedup(value));
      if (value > 1.02) figure.classList.add('oc-better');
      if (value !== null && value < 0.98) figure.classList.add('oc-worse');
      return h('div', {class: 'oc-card'}, h('div', {class: 'oc-card-title'}, title), figure,
               h('div', {class: 'oc-card-detail'}, detail));
    };
    const perStep = summary.baseline_time_per_step_us !== null && summary.target_time_per_step_us !== null;
    const timeRow = (label, run, total, perStepValue) =>
      h('div', {class: 'oc-kv'}, h('span', {class: 'oc-swatch', style: {background: SIDE_COLOURS[label]}}),
        h('span', {class: 'oc-kv-key'}, label === 'baseline' ? 'Baseline' : 'Target'),
        h('span', {class: 'oc-kv-value'}, perStep ? `${formatTime(perStepValue)} / step` : formatTime(total)));
    const runCard = (label, run) => h('div', {class: 'oc-card oc-run-card'},
      h('div', {class: 'oc-card-title'}, h('span', {class: 'oc-swatch', style: {background: SIDE_COLOURS[label]}}),
        label === 'baseline' ? 'Baseline' : 'Target'),
      h('div', {class: 'oc-run-name', title: run.run}, run.run),
      h('div', {class: 'oc-card-detail'}, deviceText(run)),
      h('div', {class: 'oc-card-detail'},
        run.batch_size ? `batch ${run.batch_size} (from ${run.batch_size_source})` : 'batch size unknown',
        ' · ', run.steps !== null ? `${run.steps} ${run.steps === 1 ? 'step' : 'steps'}` : 'steps unknown', ' · ', run.format));
    this.summary.replaceChildren(
      speedupCard('Overall speedup', summary.overall_speedup,
                  `matched op time, ${summary.overall_speedup_basis}`, 'oc-overall'),
      speedupCard('Geomean speedup', summary.geomean_speedup, `over ${summary.matched_ops} matched ops`,
                  'oc-geomean'),
      h('div', {class: 'oc-card'}, h('div', {class: 'oc-card-title'}, 'Ops'),
        h('div', {class: 'oc-counts'},
          h('span', {class: 'oc-better'}, `${summary.faster_ops} faster`),
          h('span', {class: 'oc-worse'}, `${summary.slower_ops} slower`)),
        h('div', {class: 'oc-card-detail'},
          `${summary.baseline_only_ops} only in baseline · ${summary.target_only_ops} only in target`),
        summary.noisy_ops ? h('div', {class: 'oc-card-detail oc-noisy', id: 'oc-noisy-count',
                                      title: 'matched ops whose per-occurrence time varies widely (CV > 0.5) on ' +
                                             'either side: their mean, and so their speedup, is unreliable (~ in ' +
                                             'the table; hover a mean for its spread)'},
                              `${summary.noisy_ops} noisy (~)`) : ''),
      h('div', {class: 'oc-card'}, h('div', {class: 'oc-card-title'}, perStep ? 'Op time per step' : 'Total op time'),
        timeRow('baseline', base, summary.baseline_total_us, summary.baseline_time_per_step_us),
        timeRow('target', tgt, summary.target_total_us, summary.target_time_per_step_us)),
      runCard('baseline', base),
      runCard('target', tgt));
  }

  async renderCharts() {
    const rows = this.document.rows;
    for (const side of ['baseline', 'target']) {
      this.chartTitles[side].replaceChildren(
        h('span', {class: 'oc-swatch', style: {background: SIDE_COLOURS[side]}}),
        `Top 10 ops by time share — ${side}: `, h('span', {class: 'oc-chart-run'}, this.document.summary[side].run));
    }
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      for (const side of ['baseline', 'target']) {
        this.charts[side].replaceChildren(h('div', {class: 'oc-chart-empty'}, error.message));
      }
      return;
    }
    const drawn = this.document;
    for (const side of ['baseline', 'target']) {
      if (drawn !== this.document) return;
      const top = rows.filter((row) => row[`${side}_share`] !== null)
        .sort((a, b) => b[`${side}_share`] - a[`${side}_share`]).slice(0, 10).reverse();
      const element = this.charts[side];
      if (!top.length) {
        Plotly.purge(element);
        element.replaceChildren(h('div', {class: 'oc-chart-empty'}, 'No ops on this side.'));
        continue;
      }
      element.querySelector('.oc-chart-empty')?.remove(); // Plotly keeps its own nodes: leave them for react
      const trace = {
        type: 'bar', orientation: 'h',
        x: top.map((row) => row[`${side}_share`] * 100),
        y: top.map((row, i) => i),
        text: top.map((row) => formatShare(row[`${side}_share`])),
        textposition: 'auto',
        customdata: top.map((row) => [plotlyText(row.key), formatTime(row[`${side}_total_us`]),
                                      formatTime(row[`${side}_mean_us`]), plotlyText(row.op_type || '')]),
        hovertemplate: '%{customdata[0]}<br>%{customdata[3]}<br>total %{customdata[1]} · mean %{customdata[2]}' +
          '<extra></extra>',
        marker: {color: SIDE_COLOURS[side]},
      };
      const layout = {
        margin: {l: 8, r: 16, t: 4, b: 32}, height: 300,
        xaxis: {title: {text: '% of op time', font: {size: 11}}, ticksuffix: '%', gridcolor: '#eee', zeroline: false},
        // Positions, not names, on the axis: two ops may shorten to the same label.
        yaxis: {automargin: true, tickfont: {size: 11, family: 'Roboto Mono, monospace'},
                tickvals: top.map((row, i) => i), ticktext: top.map((row) => plotlyText(truncateMiddle(row.key, 40)))},
        font: {family: 'Roboto, sans-serif', size: 12, color: '#424242'},
        paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
      };
      await Plotly.react(element, [trace], themedLayout(layout), {displayModeBar: false, responsive: true});
    }
  }

  redrawCharts() {
    if (this.document) this.renderCharts();
    this.sweep.redraw();
  }

  // ------------------------------------------------------------------ states

  showLoading(text) {
    if (!this.overlay) {
      this.root.replaceChildren(h('div', {class: 'oc-loading oc-loading-page'},
        h('div', {class: 'oc-spinner'}), h('span', {class: 'oc-loading-text'}, text)));
      return;
    }
    this.overlay.querySelector('.oc-loading-text').textContent = text;
    this.overlay.hidden = false;
  }

  hideLoading() {
    if (this.overlay) this.overlay.hidden = true;
  }

  messageBox(kind, title, text, hint) {
    return h('div', {class: `oc-panel oc-panel-${kind}`, id: 'oc-message', role: 'alert'},
      h('div', {class: 'oc-panel-title'}, title), h('div', {class: 'oc-panel-text'}, text),
      hint ? h('div', {class: 'oc-panel-hint'}, hint) : null);
  }

  showMessage(kind, title, text) {
    this.root.replaceChildren(this.messageBox(kind, title, text));
  }

  showEmptyState() {
    const snippet = (title, code) => h('div', {class: 'oc-snippet'}, h('div', {class: 'oc-label'}, title),
                                       h('pre', {}, h('code', {}, code)));
    this.root.replaceChildren(
      this.runErrorsPanel() || '',
      h('div', {class: 'oc-empty', id: 'oc-empty'},
        h('h2', {}, 'No profile runs found in this logdir'),
        h('p', {}, 'Op Compare reads the profiles TensorFlow and PyTorch already write. Profile the same model ',
          'twice, on CPU and on GPU (or at several batch sizes), into one logdir; runs named ',
          h('code', {}, 'mnist_cpu_bs32'), ' and ', h('code', {}, 'mnist_gpu_bs32'), ' pair automatically.'),
        snippet('Keras',
          'tf.keras.callbacks.TensorBoard(log_dir="logs/mnist_cpu_bs32", profile_batch=(10, 15))'),
        snippet('TensorFlow profiler',
          'tf.profiler.experimental.start("logs/mnist_gpu_bs32")\n# ... a few training steps ...\n' +
          'tf.profiler.experimental.stop()'),
        snippet('PyTorch',
          'with torch.profiler.profile(\n    schedule=torch.profiler.schedule(wait=1, warmup=1, active=5),\n' +
          '    on_trace_ready=torch.profiler.tensorboard_trace_handler("logs/mnist_torch_cpu_bs32"),\n' +
          '    record_shapes=True) as profiler:\n    for batch in loader:\n        train_step(batch)\n' +
          '        profiler.step()'),
        h('p', {}, 'Also read: TF1 ', h('code', {}, 'RunMetadata'), ' timelines (Chrome trace JSON) and ',
          h('code', {}, 'trace.json.gz'), ' from TF 2.0–2.3. New runs show up when you reload this tab.')));
  }
}

function addStylesheet() {
  if (document.querySelector('link[data-op-compare]')) return;
  document.head.append(h('link', {rel: 'stylesheet', href: 'style.css', 'data-op-compare': true}));
}

export async function render() {
  addStylesheet();
  followTheme();
  const outer = h('div', {class: 'oc-page'});
  const root = h('div', {class: 'oc-compare'});
  document.body.replaceChildren(h('div', {id: 'op-compare'}, outer));
  const app = new OpCompareApp(root);
  followTheme(() => app.redrawCharts());
  await app.start(outer);
}
