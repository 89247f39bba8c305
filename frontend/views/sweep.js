// The "Batch sweep" view: how each op and the whole step scale with batch size, one line
// per device (or precision, or compiler: "Lines by"). The plots come ready-made from the
// server, the same figures the CLI's offline HTML report shows.

import {fetchSweep, fetchSweeps, loadPlotly, sweepCsvUrl} from '../api.js';
import {SERIES_DIMENSIONS} from '../contract.js';
import {h} from '../dom.js';
import {GROUP_BY_LABELS} from '../format.js';
import {DEFAULT_SWEEP_TOP, MAX_SWEEP_TOP, sweepCsvParams, sweepParams, sweepTop} from '../state.js';
import {themedLayout} from '../theme.js';
import {FitsTable, SERIES_LABELS} from './fits.js';
import {PageSkeleton} from './skeleton.js';
import {loadingIndicator, messageBox} from './states.js';

/** @typedef {import('../contract.js').SweepDocument} SweepDocument */
/** @typedef {import('../state.js').SweepState} SweepState */

const FIGURE_NAMES = ['op_time', 'per_sample', 'step', 'speedup'];
/**
 * Why no op of the sweep can have a speedup or a break-even, where none can: the sweep
 * has no baseline line (CPU, fp32, eager) or no other line. Null where it has both.
 * @param {SweepDocument} sweep
 */
function missingSeries(sweep) {
  const baseline = sweep.baseline_series;
  const need = `speedups and break-even need ${baseline} runs and runs of another ${sweep.series_by} at the same ` +
    'batch sizes';
  if (!(baseline in sweep.batch_sizes)) return `No ${baseline} run in this sweep: ${need}.`;
  if (!sweep.target_series) return `Only ${baseline} runs in this sweep: ${need}.`;
  return null;
}

/** @param {SweepDocument} sweep */
function noSpeedupReason(sweep) {
  if (sweep.speedups.length) return null;
  return missingSeries(sweep) ||
    `No batch size was run at both ${sweep.baseline_series} and ${sweep.target_series}: speedups need both.`;
}

const MODELS_SAID = 5;

/** `cnn: batch 32 on GPU; mlp: batch 8 on CPU`, the first few models, for the empty view. */
function modelSizes(models) {
  const names = Object.keys(models || {});
  const said = names.slice(0, MODELS_SAID).map((model) => `${model}: ` + Object.entries(models[model])
    .map(([device, sizes]) => `batch ${sizes.join(', ') || 'unknown'} on ${device}`).join(', '));
  return said.join('; ') + (names.length > MODELS_SAID ? `; and ${names.length - MODELS_SAID} more` : '');
}

export class SweepView {
  /**
   * @param {{state: SweepState, onStateChange: () => void}} options `state` is changed in
   *   place, then `onStateChange` runs
   */
  constructor({state, onStateChange}) {
    this.state = state;
    this.onStateChange = onStateChange;
    this.requestId = 0;
    this.listing = null;  // the models, once listed (a promise)
    this.loading = null;  // the sweep being fetched and drawn, with its parameters
    /** @type {SweepDocument|null} */
    this.document = null;
    this.element = h('section', {class: 'oc-sweep', id: 'oc-sweep'});
  }

  /** Each time the view is opened: the models are listed once, the chosen one is loaded. */
  async show() {
    // The tab shows this view at start-up and again once the runs are listed: one
    // request for the listing and one for the sweep, however often it is shown meanwhile.
    if (!this.listing) this.listing = this.list();
    if (!await this.listing) return;
    if (this.state.model) await this.load();
  }

  /** @returns {Promise<boolean>} whether the models could be listed */
  async list() {
    this.element.replaceChildren(loadingIndicator('Finding models with several batch sizes…'));
    try {
      const listing = await fetchSweeps();
      this.models = listing.models;
      this.sweepableModels = listing.sweepable;  // best first, as the server orders them
    } catch (error) {
      this.element.replaceChildren(h('div', {class: 'oc-panel oc-panel-error', id: 'oc-sweep-message'},
                                     `Could not list the models: ${error.message}`));
      this.listing = null;  // shown again, it asks again
      return false;
    }
    this.build();
    this.onStateChange();
    return true;
  }

  sweepable() {
    return this.sweepableModels.map((model) => ({model, sizes: this.models[model]}));
  }

  build() {
    const models = this.sweepable();
    if (!models.length) {
      this.element.replaceChildren(h('div', {class: 'oc-empty', id: 'oc-sweep-empty'},
        h('h2', {}, 'No model has runs at two or more batch sizes'),
        Object.keys(this.models || {}).length ?
          h('p', {}, 'Each model here has one batch size per device: ', modelSizes(this.models), '.') : null,
        h('p', {}, 'Profile one model at several batch sizes into this logdir, e.g. ',
          h('code', {}, 'tb-opcompare record --logdir LOGDIR --model NAME --batch-sizes 1,16,64 -- python train.py ' +
            '--batch-size {batch_size}'),
          '. Whatever the runs are called, runs of one model are found from their ops, and the batch size from ',
          "the tensors' shapes where the profile records them.")));
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
      Object.entries(GROUP_BY_LABELS).map(([value, label]) => h('option', {value}, label)));
    this.groupSelect.value = this.state.group_by;
    this.seriesSelect = h('select', {class: 'oc-select', id: 'oc-sweep-series', 'aria-label': 'lines by',
                                     onchange: () => this.change({series_by: this.seriesSelect.value})},
      SERIES_DIMENSIONS.map((dimension) => h('option', {value: dimension}, SERIES_LABELS[dimension])));
    this.seriesSelect.value = this.state.series_by;
    // Where the lines are precisions or compilers, the device is held: the server's
    // choice (the device most runs were on) until one is picked.
    this.deviceSelect = h('select', {class: 'oc-select', id: 'oc-sweep-device', 'aria-label': 'device held',
                                     onchange: () => this.change({device: this.deviceSelect.value || null})});
    this.deviceField = h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Device'), this.deviceSelect);
    this.showDevices();
    this.topInput = h('input', {class: 'oc-input oc-short', id: 'oc-sweep-top', type: 'number', min: 1,
                                max: MAX_SWEEP_TOP, value: this.state.top, 'aria-label': 'ops to plot',
                                onchange: () => this.change({top: this.typedTop()})});
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-sweep-export', download: '', href: '#'}, 'Export CSV');
    this.warnings = h('div', {class: 'oc-notices'});
    this.runsList = h('div', {class: 'oc-card oc-sweep-runs'});
    this.plots = Object.fromEntries(FIGURE_NAMES.map((name) => [name, h('div', {class: 'oc-sweep-plot', id: `oc-sweep-${name}`})]));
    // Where the speedups cannot be plotted, why, in their place.
    this.speedupNote = h('div', {class: 'oc-sweep-plot-note', id: 'oc-sweep-speedup-note', hidden: true});
    this.fits = new FitsTable({onChange: () => this.showExportLink()});
    this.body = h('div', {class: 'oc-body'},
      this.warnings,
      this.runsList,
      h('div', {class: 'oc-sweep-plots'}, FIGURE_NAMES.map((name) =>
        h('div', {class: 'oc-card'}, this.plots[name], name === 'speedup' ? this.speedupNote : null))),
      h('section', {class: 'oc-filters'}, h('strong', {}, 'Linear fits: mean time = fixed + per sample × batch size'),
        this.fits.filter, h('span', {class: 'oc-spacer-flex'}), this.fits.count, this.exportLink),
      this.fits.element);
    // The export link is the fits table's, in the body: it shows and hides with it.
    this.skeleton = new PageSkeleton({body: this.body, loadingText: 'Reading the runs…'});
    this.element.replaceChildren(
      h('section', {class: 'oc-chooser'},
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Model'), this.modelSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Lines by'), this.seriesSelect),
        this.deviceField,
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Group'), this.groupSelect),
        h('label', {class: 'oc-field'}, h('span', {class: 'oc-label'}, 'Ops to plot'), this.topInput)),
      this.skeleton.message,
      this.skeleton.element);
  }

  /** The number typed, within what the route takes; nothing or not a number: the default. */
  typedTop() {
    return sweepTop(this.topInput.value) || DEFAULT_SWEEP_TOP;
  }

  /** The devices the chosen model ran on, offered where the lines are not devices. */
  showDevices() {
    const devices = Object.keys((this.models || {})[this.state.model] || {});
    if (this.state.device && !devices.includes(this.state.device)) this.state.device = null;
    this.deviceSelect.replaceChildren(h('option', {value: ''}, 'most runs'),
      ...devices.map((device) => h('option', {value: device}, device)));
    this.deviceSelect.value = this.state.device || '';
    this.deviceField.hidden = this.state.series_by === 'device' || devices.length < 2;
  }

  change(changes) {
    Object.assign(this.state, changes);
    this.showDevices();
    this.onStateChange();
    this.load();
  }

  load() {
    const key = JSON.stringify(sweepParams(this.state));
    if (this.loading && this.loading.key === key) return this.loading.done;
    const done = this.fetchAndDraw().finally(() => {
      if (this.loading && this.loading.done === done) this.loading = null;
    });
    this.loading = {key, done};
    return done;
  }

  async fetchAndDraw() {
    if (!this.modelSelect) return;
    const id = ++this.requestId;
    this.skeleton.loading();
    let document;
    try {
      document = await fetchSweep(sweepParams(this.state));
    } catch (error) {
      if (id !== this.requestId) return;
      this.skeleton.showMessage(messageBox({kind: 'error', title: 'The sweep failed', text: error.message,
                                            id: 'oc-sweep-message'}));
      return;
    }
    if (id !== this.requestId) return;
    this.skeleton.loaded();
    this.document = document;
    this.showExportLink();
    this.warnings.replaceChildren(...document.warnings.map((warning) =>
      h('div', {class: 'oc-panel oc-panel-warning oc-sweep-warning'}, warning)));
    const held = Object.entries(document.held).map(([dimension, value]) => `${dimension} ${value}`).join(', ');
    this.runsList.replaceChildren(h('div', {class: 'oc-card-title'}, `Runs in this sweep (${held})`),
      h('ul', {class: 'oc-sweep-run-list'}, document.runs.map((run) => h('li', {},
        h('span', {class: 'oc-run-name'}, run.run), ` · ${run.device}`, run.device_name ? ` (${run.device_name})` : '',
        ` · ${run.precision || 'precision unknown'} · ${run.compiler || 'compiler unknown'}`,
        ' · ', run.batch_size ? `batch ${run.batch_size}` : 'batch size unknown',
        h('span', {class: 'oc-card-detail'}, run.batch_size_source ? ` — from ${run.batch_size_source}` : '')))));
    this.fits.show(document, missingSeries(document));
    await this.drawPlots(id);
  }

  /** The export of the fits table as it is shown: its rows, in its order. */
  showExportLink() {
    this.exportLink.href = sweepCsvUrl(sweepCsvParams(this.state, this.fits.view));
  }

  async drawPlots(id = this.requestId) {
    const Plotly = await loadPlotly();
    if (id !== this.requestId || !this.document) return;
    for (const name of FIGURE_NAMES) {
      const figure = this.document.figures[name];
      const element = this.plots[name];
      const why = name === 'speedup' && !figure ? noSpeedupReason(this.document) : null;
      element.parentElement.hidden = !figure && !why;
      element.hidden = !figure;
      if (name === 'speedup') {
        this.speedupNote.hidden = !why;
        this.speedupNote.textContent = why || '';
      }
      if (figure) {
        await Plotly.react(element, figure.data, themedLayout(figure.layout), {displaylogo: false, responsive: true});
      } else {
        Plotly.purge(element);
      }
    }
  }

  /** Draw the plots again (in the current theme), if they are on screen. */
  redraw() {
    if (this.document && !this.element.hidden) this.drawPlots();
  }
}
