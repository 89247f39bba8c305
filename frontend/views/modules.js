// The "Modules" view: the module trees of the runs the Compare page compares, side by
// side (model -> module -> op), as a collapsible table. The modules route computes the
// tree; this draws its nodes as they come (depth first, the larger child first), and
// builds rows for the expanded part of the tree only, so a big model's thousands of ops
// cost nothing until their module is opened.

import {fetchModules, modulesCsvUrl} from '../api.js';
import {h, setText} from '../dom.js';
import {formatBytes, formatShare, formatSpeedup, formatStatus, formatTime, headlineText,
  speedupColor} from '../format.js';
import {poolNoteSlot, showPairPage} from './latest.js';
import {PageSkeleton} from './skeleton.js';
import {messageBox} from './states.js';

/** @typedef {import('../contract.js').ModulesDocument} ModulesDocument */
/** @typedef {import('../contract.js').ModuleNode} ModuleNode */
/** @typedef {import('../state.js').Selection} Selection */
/** @typedef {import('../api.js').ApiError} ApiError */

/**
 * The nodes by id and each node's children, in the document's order.
 * @typedef {Object} ModuleTree
 * @property {ModuleNode|null} root
 * @property {Map<string, ModuleNode>} byId
 * @property {Map<string, ModuleNode[]>} children by the parent's id
 */

/**
 * A row to show: its node, whether it has children to open, and whether they are shown.
 * @typedef {Object} TreeRow
 * @property {ModuleNode} node
 * @property {boolean} branch a module with children
 * @property {boolean} open its children are shown
 */

const INDENT_PX = 16;

/**
 * @param {ModuleNode[]} nodes as the route gives them: parents before their children
 * @returns {ModuleTree}
 */
export function moduleTree(nodes) {
  const byId = new Map();
  const children = new Map();
  let root = null;
  for (const node of nodes) {
    byId.set(node.id, node);
    if (node.parent === null) {
      root = root || node;
      continue;
    }
    if (!children.has(node.parent)) children.set(node.parent, []);
    children.get(node.parent).push(node);
  }
  return {root, byId, children};
}

/** Whether `node` is a module with children (ops are always leaves). */
export function isBranch(tree, node) {
  return node.kind !== 'op' && (tree.children.get(node.id) || []).length > 0;
}

/**
 * What is open at first: the root and the modules at depth 1, so depth 2 shows. Not
 * "(outside modules)" or "(top level)": they hold every op no module call was around
 * (the backward pass, the optimizer), dozens that would push the modules off screen.
 * @param {ModuleTree} tree
 * @returns {Set<string>}
 */
export function initiallyOpen(tree) {
  return new Set([...tree.byId.values()].filter((node) => (node.depth === 0 || (node.depth === 1 &&
    !node.name.startsWith('('))) && isBranch(tree, node)).map((node) => node.id));
}

/** Every module with children: what "Expand all" opens. */
export function allBranches(tree) {
  return new Set([...tree.byId.values()].filter((node) => isBranch(tree, node)).map((node) => node.id));
}

/**
 * The ids a filter keeps: the nodes whose name holds `text` (any case) and their
 * ancestors; null for no filter (blank text).
 * @param {ModuleTree} tree
 * @param {string} text
 * @returns {Set<string>|null}
 */
export function filterKeeps(tree, text) {
  const needle = text.trim().toLowerCase();
  if (!needle) return null;
  const kept = new Set();
  for (const node of tree.byId.values()) {
    if (!node.name.toLowerCase().includes(needle)) continue;
    for (let id = node.id; id !== null && id !== undefined && !kept.has(id); id = tree.byId.get(id)?.parent) {
      kept.add(id);
    }
  }
  return kept;
}

/**
 * The rows on screen, depth first in the document's order: the children of open nodes
 * only; with a filter, the kept nodes, each shown open where it has kept children.
 * Collapsed subtrees are never walked.
 * @param {ModuleTree} tree
 * @param {Set<string>} open
 * @param {Set<string>|null} kept filterKeeps' answer
 * @returns {TreeRow[]}
 */
export function visibleRows(tree, open, kept = null) {
  const rows = [];
  const walk = (node) => {
    const children = kept ? (tree.children.get(node.id) || []).filter((child) => kept.has(child.id)) :
      tree.children.get(node.id) || [];
    const branch = kept ? children.length > 0 : isBranch(tree, node);
    const shown = branch && (kept !== null || open.has(node.id));
    rows.push({node, branch, open: shown});
    if (shown) for (const child of children) walk(child);
  };
  if (tree.root && (!kept || kept.has(tree.root.id))) walk(tree.root);
  return rows;
}

/** What the caption says of where the modules come from and what the times are. */
export function captionText(document) {
  const per = document.per_step ? 'per profiled step' :
    'in all (not per step: a run does not know its step count)';
  return `${document.baseline} → ${document.target}: modules from ${document.source}; times and bytes ` +
    `allocated ${per}, shares of each run's whole model, speedup = baseline time / target time.`;
}

/** @param {ApiError} error */
function modulesFailed(error) {
  return messageBox({kind: 'error', title: 'The module trees cannot be compared', text: error.message,
                     id: 'oc-modules-message'});
}

export class ModulesView {
  /**
   * @param {{selection: Selection, ready: () => Promise<boolean|null>, onOpenCompare: () => void}} options
   *   `selection` is the Compare page's (read each time the view is shown); `ready` settles
   *   once the runs are known (false: none); `onOpenCompare` shows the Compare page
   */
  constructor({selection, ready, onOpenCompare}) {
    this.selection = selection;
    this.ready = ready;
    this.onOpenCompare = onOpenCompare;
    this.requestId = 0;
    this.loading = null;
    this.shownKey = null;
    /** @type {ModuleTree|null} */
    this.tree = null;
    /** @type {Set<string>} */
    this.open = new Set();
    this.element = h('section', {class: 'oc-modules-view', id: 'oc-modules'});
    this.build();
  }

  build() {
    this.filterInput = h('input', {class: 'oc-input', id: 'oc-modules-filter', type: 'search',
                                   placeholder: 'module or op name', 'aria-label': 'filter modules and ops',
                                   title: 'shows the nodes whose name holds this (any case), and their modules',
                                   oninput: () => this.drawRows()});
    this.expandButton = h('button', {class: 'oc-segment oc-modules-expand', id: 'oc-modules-expand', type: 'button',
                                     onclick: () => this.setOpen(allBranches(this.tree))}, 'Expand all');
    this.collapseButton = h('button', {class: 'oc-segment oc-modules-collapse', id: 'oc-modules-collapse',
                                       type: 'button', onclick: () => this.setOpen(new Set())}, 'Collapse all');
    this.exportLink = h('a', {class: 'oc-button', id: 'oc-modules-export', download: '', href: '#'}, 'Download CSV');
    this.notes = h('div', {class: 'oc-notices', id: 'oc-modules-notes'});
    this.headline = h('div', {class: 'oc-view-headline', id: 'oc-modules-headline'});
    this.caption = h('div', {class: 'oc-modules-caption', id: 'oc-modules-caption'});
    this.rows = h('tbody');
    const numeric = (text, title) => h('th', {class: 'oc-num', scope: 'col', title}, text);
    this.table = h('table', {class: 'oc-table oc-modules', id: 'oc-modules-table'},
      h('colgroup', {}, h('col', {}), [1, 2, 3, 4, 5, 6, 7].map(() => h('col', {class: 'oc-modules-number-column'}))),
      h('thead', {}, h('tr', {},
        h('th', {scope: 'col'}, 'Module / op'),
        numeric('Baseline', 'time inside the node on the baseline'),
        numeric('Target', 'time inside the node on the target'),
        numeric('Baseline share', 'of the baseline\'s whole model'),
        numeric('Target share', 'of the target\'s whole model'),
        numeric('Speedup', 'baseline time / target time'),
        numeric('Baseline alloc', 'bytes the ops inside the node allocated on the baseline (– : memory not recorded)'),
        numeric('Target alloc', 'bytes the ops inside the node allocated on the target'))),
      this.rows);
    this.poolSlot = poolNoteSlot();
    this.body = h('div', {class: 'oc-body'}, this.poolSlot, this.notes, this.headline, this.caption,
      h('div', {class: 'oc-table-scroll oc-modules-scroll'}, this.table));
    this.skeleton = new PageSkeleton({body: this.body, exportLink: this.exportLink,
                                      loadingText: 'Reading both runs…'});
    this.controls = h('section', {class: 'oc-chooser'},
      h('label', {class: 'oc-field oc-modules-filter-field'}, h('span', {class: 'oc-label'}, 'Filter'),
        this.filterInput),
      h('div', {class: 'oc-segments oc-modules-buttons'}, this.expandButton, this.collapseButton),
      h('span', {class: 'oc-spacer-flex'}), this.exportLink);
    this.element.replaceChildren(this.controls, this.skeleton.message, this.skeleton.element);
  }

  /** Each time the view is opened: the trees of the Compare page's runs, unless on screen. */
  async show() {
    return showPairPage(this, {
      id: 'oc-modules', fetch: fetchModules, failed: modulesFailed, clear: () => { this.tree = null; },
      shown: (hasPair) => { this.controls.hidden = !hasPair; },
      text: 'This page compares the module trees of the runs chosen on the Compare runs page.'});
  }


  /** @param {ModulesDocument} document */
  draw(document, params) {
    this.tree = moduleTree(document.nodes);
    this.open = initiallyOpen(this.tree);
    this.exportLink.href = modulesCsvUrl(params);
    this.notes.replaceChildren(...document.notes.map((note) =>
      h('div', {class: 'oc-panel oc-panel-note oc-modules-note'}, note)));
    setText(this.headline, headlineText(document.headline));
    setText(this.caption, captionText(document));
    this.drawRows();
  }

  setOpen(open) {
    if (!this.tree) return;
    this.open = open;
    this.drawRows();
  }

  toggle(id) {
    if (this.open.has(id)) this.open.delete(id);
    else this.open.add(id);
    this.drawRows();
    // the rows are new: keep the keyboard on the toggle just used
    const toggle = [...this.rows.children].find((row) => row.dataset.id === id)?.querySelector('button');
    if (toggle) toggle.focus();
  }

  drawRows() {
    if (!this.tree) return;
    const kept = filterKeeps(this.tree, this.filterInput.value);
    const rows = visibleRows(this.tree, this.open, kept);
    this.expandButton.disabled = kept !== null;
    this.collapseButton.disabled = kept !== null;
    if (!rows.length) {
      this.rows.replaceChildren(h('tr', {}, h('td', {class: 'oc-no-rows', colspan: 8},
        kept ? 'No module or op has that name' : 'No modules')));
      return;
    }
    this.rows.replaceChildren(...rows.map((row) => this.row(row, kept !== null)));
  }

  /**
   * @param {TreeRow} row
   * @param {boolean} filtered a filter decides what is open: no toggles
   */
  row({node, branch, open}, filtered) {
    const toggle = !branch ? h('span', {class: 'oc-tree-toggle oc-tree-leaf'}) : filtered ?
      h('span', {class: 'oc-tree-toggle'}, '▾') :
      h('button', {class: 'oc-tree-toggle', type: 'button', 'aria-expanded': String(open),
                   'aria-label': `${open ? 'collapse' : 'expand'} ${node.name}`,
                   onclick: () => this.toggle(node.id)}, open ? '▾' : '▸');
    const side = (value, format) => h('td', {class: 'oc-num'}, format(value));
    return h('tr', {class: `oc-row oc-tree-row oc-tree-${node.kind}`, 'data-id': node.id, 'data-kind': node.kind,
                    'data-depth': String(node.depth), 'data-status': node.status,
                    'aria-level': String(node.depth + 1), 'aria-expanded': branch ? String(open) : null},
      h('td', {class: 'oc-tree-name', title: node.id || node.name,
               style: {paddingLeft: `${8 + node.depth * INDENT_PX}px`}},
        toggle, h('span', {class: node.kind === 'op' ? 'oc-text oc-tree-label' : 'oc-tree-label'}, node.name),
        node.status === 'matched' ? null :
          h('span', {class: `oc-status oc-status-${node.status}`}, formatStatus(node.status))),
      side(node.baseline_us, formatTime), side(node.target_us, formatTime),
      side(node.baseline_share, formatShare), side(node.target_share, formatShare),
      h('td', {class: 'oc-num'}, h('span', {class: 'oc-speedup', style: speedupColor(node.speedup)},
        formatSpeedup(node.speedup))),
      side(node.baseline_alloc_bytes, formatBytes), side(node.target_alloc_bytes, formatBytes));
  }
}
