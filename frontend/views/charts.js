// The two top-10 charts: each side's ops with the largest share of its op time.

import {loadPlotly} from '../api.js';
import {h} from '../dom.js';
import {formatShare, formatTime, plotlyText, shortenNames} from '../format.js';
import {themedLayout} from '../theme.js';
import {SIDES, SIDE_COLOURS, sideSwatch} from './sides.js';

/** @typedef {import('../contract.js').CompareDocument} CompareDocument */
/** @typedef {import('../contract.js').CompareRow} CompareRow */
/** @typedef {import('./sides.js').Side} Side */

const TOP = 10;
const LABEL_LENGTH = 40;

/**
 * @param {CompareRow[]} rows
 * @param {Side} side
 */
function topOps(rows, side) {
  return rows.filter((row) => row[`${side}_share`] !== null)
    .sort((a, b) => b[`${side}_share`] - a[`${side}_share`]).slice(0, TOP).reverse();
}

/**
 * @param {CompareRow[]} top
 * @param {Side} side
 */
function figure(top, side) {
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
    yaxis: {automargin: true, tickfont: {size: 11, family: 'Roboto Mono, monospace'}, tickvals: top.map((row, i) => i),
            ticktext: shortenNames(top.map((row) => row.key), LABEL_LENGTH).map(plotlyText)},
    font: {family: 'Roboto, sans-serif', size: 12, color: '#424242'},
    paper_bgcolor: 'rgba(0,0,0,0)', plot_bgcolor: 'rgba(0,0,0,0)',
  };
  return {data: [trace], layout: themedLayout(layout)};
}

function emptyNote(text) {
  return h('div', {class: 'oc-chart-empty'}, text);
}

export class TopOpsCharts {
  constructor() {
    this.charts = Object.fromEntries(SIDES.map((side) => [side, h('div', {class: 'oc-chart', id: `oc-chart-${side}`})]));
    this.titles = Object.fromEntries(SIDES.map((side) => [side, h('h3', {})]));
    this.element = h('section', {class: 'oc-charts', 'aria-label': 'top ops'},
      SIDES.map((side) => h('div', {class: 'oc-card oc-chart-card'}, this.titles[side], this.charts[side])));
    this.comparison = null;
  }

  /**
   * Draw `comparison`'s charts; a later call supersedes one still drawing.
   * @param {CompareDocument} comparison
   */
  async show(comparison) {
    this.comparison = comparison;
    for (const side of SIDES) {
      const pooled = comparison.summary[`${side}_runs`]?.length || 1; // a run group: its first run named
      this.titles[side].replaceChildren(sideSwatch(side), `Top ${TOP} ops by time share — ${side}: `,
        h('span', {class: 'oc-chart-run'}, comparison.summary[side].run),
        pooled > 1 ? ` and its repeats (${pooled} runs pooled)` : '');
    }
    let Plotly;
    try {
      Plotly = await loadPlotly();
    } catch (error) {
      for (const side of SIDES) this.charts[side].replaceChildren(emptyNote(error.message));
      return;
    }
    for (const side of SIDES) {
      if (comparison !== this.comparison) return;
      const top = topOps(comparison.rows, side);
      const element = this.charts[side];
      if (!top.length) {
        Plotly.purge(element);
        element.replaceChildren(emptyNote('No ops on this side.'));
        continue;
      }
      element.querySelector('.oc-chart-empty')?.remove(); // Plotly keeps its own nodes: leave them for react
      const {data, layout} = figure(top, side);
      await Plotly.react(element, data, layout, {displayModeBar: false, responsive: true});
    }
  }
}
