// The "Batch sweep" view: how each op and the whole step scale with batch size.
// The plots come ready-made from the server (tb_opcompare/sweep_figures.py), the same
// figures the CLI's offline HTML report shows.

import {formatShare, formatTime, h} from './format.js';
import {themedLayout} from './theme.js';

const FIT_COLUMNS = [
  {name: 'op', label: 'Op', text: true},
  {name: 'device', label: 'Device', text: true},
  {name: 'share', label: 'Share', title: 'mean share of op time across the runs'},
  {name: 'fixed_us', label: 'Fixed', time: true, title: 'time at batch size 0 (intercept)'},
  {name: 'per_sample_us', label: 'Per sample', time: true, title: 'added time per sample (slope)'},
  {name: 'r2', label: 'R²', title: 'how well the line fits the measured points'},
  {name: 'points', label: 'Points'},
  {name: 'breakeven_batch_size', label: 'Break-even batch', title: 'batch size where the accelerator starts to win'},
];
const FIGURE_NAMES = ['op_time', 'per_sample', 'step', 'speedup'];

function breakevenText(row) {
  if (row.breakeven_batch_size !== null && row.breakeven_batch_size !== undefined) {
    const size = row.breakeven_batch_size.toFixed(row.breakeven_batch_size < 10 ? 1 : 0);
    return row.gpu_faster === 'below' ? `GPU faster below ${size}` : `GPU faster above ${size}`;
  }
  return {always: 'GPU always faster', never: 'GPU never faster'}[row.gpu_faster] || '–';
}

export class SweepView {
  constructor({fetchJson, loadPlotly, state, onStateChange}) {
    this.fetchJson = fetchJson;
    this.loadPlotly = loadPlotly;
    this.state = state; // {model, top, group_by}
    this.onStateChange = onStateChange;
    this.sort = {column: 'share', order: 'desc'};
    this.requestId = 0;
    this.element = h('section', {class: 'oc-sweep', id: 'oc-sweep'});
  }

  async show() {
    if (!this.models) {
      this.element.replaceChildren(h('div', {class: 'oc-loading oc-loading-page'}, h('div', {class: 'oc-spinner'}),
                                     h('span', {}, 'Finding models with several batch sizes…')));
      try {
        const listing = await this.fetchJson('sweeps');
        this.models = listing.models;
        this.sweepableModels = listing.sweepable;  // best first, as the server orders them
      } catch (error) {
        this.element.replaceChildren(h('div', {class: 'oc-panel oc-panel-error', id: 'oc-sweep-message'},
                                       `Could not list the models: ${error.message}`));
        return;
      }
      this.build();
      this.onStateChange();
    }
    if (this.state.model) await this.load();
  }

  sweepable() {
    return this.sweepableModels.map((model) => ({model, sizes: this.models[model]}));
  }

  build() {
    const models = this.sweepable();
    if (!models.length) {
      this.element.replaceChildren(h('div', {class: 'oc-empty', id: 'oc-sweep-empty'},
        h('h2', {}, 'No model has runs at two or more batch sizes'),
        h('p', {}, 'Profile the same model at several batch sizes into one logdir and name the runs after the ',
          'model, the device and the batch size, e.g. ', h('code', {}, 'mnist_cpu_bs1'), ', ',
          h('code', {}, 'mnist_cpu_bs16'), ', ', h('code', {}, 'mnist_gpu_bs16'),
          '. Runs whose tensors record their shapes get the measured batch size.')));
      return;
    }
    if (!models.some((entry) => entry.model === this.state.model)) this.state.model = models[0].model;
    this.modelSelect = h('select', {class: 'oc-select', id: 'oc-sweep-model', 'aria-label': 'model',
                                    onchange: () => this.change({model: this.modelSelect.value})},
      models.map(({model, sizes}) => h('option', {value: model},
        `${model} — ${Object.entries(sizes).map(([device, list]) => `${device} ${list.join('/')}`).join(', ')}`)));
    this.modelSelect.value = this.state.model;
    this.groupSelect = h('select', {class: 'oc-select', id: 'oc-sweep-group', 'aria-label': 'group ops by',
                                    onchange: () => this.change({group_by: this.groupSelect.value})},
      h('option', {value: 'name'}, 'By op name'), h('option', {value: 'type'}, 'By op type'));
    this.groupSelect.value = this.state.group_by;
    this.topInput = h('input', {class: 'oc-input oc-short', id: 'oc-sweep-top', type: 'number', min: 1, max: 50,
                                value: this.state.top, 'aria-label': 'ops to plot',
                                onchange: () => this.change({top: Math.min(50, Math.max(1, parseInt(this.topInput.value, 10) || 10))})});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-sweep-export', download: '', href: '#'}, 'Export CSV');
    this.warnings = h('div', {class: 'oc-notices'});
    this.runsList = h('div', {class: 'oc-card oc-sweep-runs'});
    this.plots = Object.fromEntries(FIGURE_NAMES.map((name) => [name, h('div', {class: 'oc-sweep-plot', id: `oc-sweep-${name}`})]));
    this.fitFilter = h('input', {class: 'oc-input oc-filter', type: 'search', placeholder: 'Filter ops',
                                 'aria-label': 'filter fits', oninput: () => this.renderFits()});
    this.fitHead = h('tr');
    this.fitBody = h('tbody');
    this.fitCount = h('span', {class: 'oc-count', id: 'oc-sweep-count'});
    this.body = h('div', {class: 'oc-body'},
      this.warnings,
      this.runsList,
      h('div', {class: 'oc-sweep-plots'}, FIGURE_NAMES.map((name) => h('div', {class: 'oc-card'}, this.plots[name]))),
      h('section', {class: 'oc-filters'}, h('strong', {}, 'Linear fits: mean time = fixed + per sample × batch size'),
        this.fitFilter, h('span', {class: 'oc-spacer-flex'}), this.fitCount, this.exportLink),
      h('div', {class: 'oc-table-scroll oc-fits-scroll'},
        h('table', {class: 'oc-table oc-fits', id: 'oc-fits'}, h('thead', {}, this.fitHead), this.fitBody)));
    this.overlay = h('div', {class: 'oc-loading', hidden: true}, h('div', {class: 'oc-spinner'}),
                     h('span', {}, 'Reading the runs…'));
    this.message = h('div', {class: 'oc-message-slot'});
    this.element.replaceChildren(
      h('section', {class: 'oc-chooser'},
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Model'), this.modelSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Group'), this.groupSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Ops to plot'), this.topInput)),
      this.message,
      h('div', {class: 'oc-body'}, this.body, this.overlay));
  }

  change(changes) {
    Object.assign(this.state, changes);
    this.onStateChange();
    this.load();
  }

  params() {
    return new URLSearchParams({model: this.state.model, top: String(this.state.top), group_by: this.state.group_by});
  }

  async load() {
    if (!this.modelSelect) return;
    const id = ++this.requestId;
    this.overlay.hidden = false;
    this.message.replaceChildren();
    let document;
    try {
      document = await this.fetchJson(`sweep?${this.params()}`);
    } catch (error) {
      if (id !== this.requestId) return;
      this.overlay.hidden = true;
      this.body.hidden = true;
      this.message.replaceChildren(h('div', {class: 'oc-panel oc-panel-error', id: 'oc-sweep-message', role: 'alert'},
        h('div', {class: 'oc-panel-title'}, 'The sweep failed'), h('div', {class: 'oc-panel-text'}, error.message)));
      return;
    }
    if (id !== this.requestId) return;
    this.overlay.hidden = true;
    this.body.hidden = false;
    this.document = document;
    this.exportLink.href = `sweep.csv?${this.params()}`;
    this.warnings.replaceChildren(...document.warnings.map((warning) =>
      h('div', {class: 'oc-panel oc-panel-warning oc-sweep-warning'}, warning)));
    this.runsList.replaceChildren(h('div', {class: 'oc-card-title'}, 'Runs in this sweep'),
      h('ul', {class: 'oc-sweep-run-list'}, document.runs.map((run) => h('li', {},
        h('span', {class: 'oc-run-name'}, run.run), ` · ${run.device}`, run.device_name ? ` (${run.device_name})` : '',
        ' · ', run.batch_size ? `batch ${run.batch_size}` : 'batch size unknown',
        h('span', {class: 'oc-card-detail'}, run.batch_size_source ? ` — from ${run.batch_size_source}` : '')))));
    this.renderFits();
    await this.drawPlots(id);
  }

  async drawPlots(id = this.requestId) {
    const Plotly = await this.loadPlotly();
    if (id !== this.requestId || !this.document) return;
    for (const name of FIGURE_NAMES) {
      const figure = this.document.figures[name];
      const element = this.plots[name];
      element.parentElement.hidden = !figure;
      if (figure) {
        await Plotly.react(element, figure.data, themedLayout(figure.layout), {displaylogo: false, responsive: true});
      } else {
        Plotly.purge(element);
      }
    }
  }

  redraw() {
    if (this.document && !this.element.hidden) this.drawPlots();
  }

  sortBy(column) {
    this.sort = this.sort.column === column ? {column, order: this.sort.order === 'asc' ? 'desc' : 'asc'} :
      {column, order: FIT_COLUMNS.find((c) => c.name === column).text ? 'asc' : 'desc'};
    this.renderFits();
  }

  renderFits() {
    if (!this.document) return;
    const crossings = new Map(this.document.breakeven.map((row) => [row.op, row]));
    let rows = this.document.fits.map((fit) => ({...fit,
      breakeven_batch_size: crossings.get(fit.op)?.batch_size ?? null, gpu_faster: crossings.get(fit.op)?.gpu_faster ?? null}));
    const needle = this.fitFilter.value.toLowerCase();
    if (needle) rows = rows.filter((row) => row.op.toLowerCase().includes(needle));
    const {column, order} = this.sort;
    const direction = order === 'asc' ? 1 : -1;
    const present = rows.filter((row) => row[column] !== null);
    present.sort((a, b) => direction * (a[column] < b[column] ? -1 : a[column] > b[column] ? 1 : 0));
    rows = present.concat(rows.filter((row) => row[column] === null));
    this.fitHead.replaceChildren(...FIT_COLUMNS.map((c) => h('th', {
      'data-column': c.name, title: c.title, class: c.text ? '' : 'oc-num',
      'aria-sort': c.name === column ? (order === 'asc' ? 'ascending' : 'descending') : 'none',
      onclick: () => this.sortBy(c.name)}, c.label, h('span', {class: 'oc-sort-mark'},
      c.name === column ? (order === 'asc' ? '▲' : '▼') : ''))));
    this.fitBody.replaceChildren(...rows.slice(0, 2000).map((row) => h('tr', {class: row.poor_fit ? 'oc-poor-fit' : ''},
      h('td', {class: 'oc-text', title: row.op}, row.op),
      h('td', {}, row.device),
      h('td', {class: 'oc-num'}, formatShare(row.share)),
      h('td', {class: 'oc-num'}, formatTime(row.fixed_us)),
      h('td', {class: 'oc-num'}, formatTime(row.per_sample_us)),
      h('td', {class: 'oc-num', title: row.poor_fit ? 'poor fit: the points are not on a line' : ''},
        row.r2.toFixed(3), row.poor_fit ? ' ⚠' : ''),
      h('td', {class: 'oc-num'}, String(row.points)),
      h('td', {class: 'oc-num'}, breakevenText(row)))));
    this.fitCount.textContent = `${rows.length} fits`;
  }
}
