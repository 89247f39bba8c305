// A view that fetches one document for its parameters and draws it. The user may change the
// parameters while a fetch is under way: only the latest request may touch the screen, an
// answer to an older one arrives late and is dropped, and asking again for what is loading
// or on screen fetches nothing. What the page shows meanwhile (spinner, body, message,
// export link) is its PageSkeleton's to switch.

import {h} from '../dom.js';
import {pairParams} from '../state.js';

import {messageBox} from './states.js';

/** @typedef {import('./skeleton.js').PageSkeleton} PageSkeleton */

/**
 * A view's loading state: `requestId` counts its requests (its drawing checks it after
 * each wait, to tell it is stale), `loading` is the request under way, `shownKey` the
 * parameters of the document on screen.
 * @typedef {Object} LatestView
 * @property {number} requestId
 * @property {?{key: string, done: Promise<void>}} loading
 * @property {?string} shownKey
 * @property {PageSkeleton} skeleton
 */

/**
 * Fetch and draw the document for `params`, unless it is on screen or being loaded.
 * @template D
 * @param {LatestView} view
 * @param {Object<string, string>} params
 * @param {{fetch: (params: Object<string, string>) => Promise<D>, failed: (error: Error) => Node,
 *          draw: (document: D, params: Object<string, string>, id: number) => (void|Promise<void>)}} steps
 *   `failed` returns the error to show in place of the body (and may forget the page's
 *   document); `draw` fills the body (already shown; it may show a message instead, for a
 *   document with nothing to draw), with `id` to check after each of its own waits
 * @returns {Promise<void>|undefined} settles once drawn; undefined when on screen already
 */
export function showLatest(view, params, steps) {
  const key = JSON.stringify(params);
  if (key === view.shownKey) return;
  if (view.loading && view.loading.key === key) return view.loading.done;
  const done = fetchAndDraw(view, params, key, steps).finally(() => {
    if (view.loading && view.loading.done === done) view.loading = null;
  });
  view.loading = {key, done};
  return done;
}

async function fetchAndDraw(view, params, key, {fetch, failed, draw}) {
  const id = ++view.requestId;
  view.shownKey = null;
  view.skeleton.loading();
  let document;
  try {
    document = await fetch(params);
  } catch (error) {
    if (id !== view.requestId) return;
    view.skeleton.showMessage(failed(error));
    return;
  }
  if (id !== view.requestId) return;
  view.shownKey = key;
  view.skeleton.loaded();
  await draw(document, params, id);
}

/**
 * Drop whatever the view was loading or showing, and show `nodes` in place of its body:
 * an answer still on its way is for what the page no longer asks.
 * @param {LatestView} view
 * @param {...(Node|string)} nodes
 */
export function showInstead(view, ...nodes) {
  view.requestId++;
  view.loading = null;
  view.shownKey = null;
  view.skeleton.showMessage(...nodes);
}

/**
 * A page of the two runs chosen on Compare (Modules, Layers, Memory) with no runs chosen:
 * drop whatever was loading or shown, and say where to choose them.
 * @param {LatestView} view
 * @param {{id: string, text: string, onOpenCompare: () => void}} page `id` prefixes the
 *   message's and button's ids (`oc-layers`); `text` says what the page compares
 */
export function showNoRuns(view, {id, text, onOpenCompare}) {
  showInstead(view, messageBox({
    kind: 'note', title: 'No runs chosen', id: `${id}-message`, text,
    hint: 'Choose a baseline and a target there, then come back.'}), openCompareButton(id, onOpenCompare));
}

/** The button that takes a pair page back to the Compare page. */
export function openCompareButton(id, onOpenCompare) {
  return h('button', {class: 'oc-segment', id: `${id}-open-compare`, type: 'button', onclick: () => onOpenCompare()},
           'Go to Compare runs');
}


/** Where a page of the two runs chosen on Compare says that Compare pools their repeats. */
export function poolNoteSlot() {
  return h('div', {class: 'oc-pool-slot'});
}

/**
 * Each time the page is shown: a note while the Compare page pools repeats (this page
 * reads the two runs chosen, not their repeats), none otherwise.
 * @param {HTMLElement} slot
 * @param {{repeats?: boolean}} selection
 */
export function showPoolNote(slot, selection) {
  slot.replaceChildren(...(selection.repeats ? [h('div', {class: 'oc-panel oc-panel-note oc-pool-note'},
    'Pool repeats applies to the Compare table: this page shows the two runs chosen, not their repeats.')] : []));
}

/**
 * Each time a page of the two runs chosen on Compare is opened (Modules, Memory, Layers,
 * Roofline): its document for the pair, or a note to choose runs there first; the pool
 * note either way. `clear` forgets what the page held, where it has no pair or its fetch
 * failed; `shown` (optional) is told whether there is a pair to show.
 * @param {LatestView & {ready: () => Promise<boolean>, selection: Object, poolSlot: HTMLElement,
 *   onOpenCompare: () => void, draw: (document: Object, params: Object, id: number) => unknown}} view
 * @param {{id: string, text: string, fetch: (params: Object) => Promise<Object>,
 *   failed: (error: Error) => HTMLElement, clear: () => void, shown?: (hasPair: boolean) => void}} page
 */
export async function showPairPage(view, {id, text, fetch, failed, clear, shown = () => {}}) {
  const ready = await view.ready();
  const params = pairParams(view.selection);
  shown(Boolean(ready && params));
  if (!ready || !params) {
    clear();
    showNoRuns(view, {id, onOpenCompare: view.onOpenCompare, text});
    return;
  }
  showPoolNote(view.poolSlot, view.selection);
  return showLatest(view, params, {
    fetch,
    failed: (error) => {
      clear();
      return failed(error);
    },
    draw: (document, drawnParams, requestId) => view.draw(document, drawnParams, requestId),
  });
}
