// The frame each page draws its document in: the page's body, a spinner over it while a
// request is under way, a message in its place when there is nothing to show (the route
// failed, no runs are chosen, the runs record nothing), and the page's export link. One
// component, so that every page loads, fails and recovers alike: an error never sits
// above a body that still shows the last document, and the export link is offered only
// while the document it exports is on screen.

import {h, setText} from '../dom.js';
import {loadingIndicator} from './states.js';

export class PageSkeleton {
  /**
   * Nothing is shown until the page loads something: the body and export link start hidden.
   * @param {{body: HTMLElement, loadingText: string, exportLink?: HTMLElement|null, frameClass?: string}} parts
   *   `body` the page's content; `loadingText` what the spinner says is read; `exportLink`
   *   shown and hidden with the body (none where the body holds it, or another part of the
   *   page decides when it shows); `frameClass` classes of the frame besides `oc-body`
   */
  constructor({body, loadingText, exportLink = null, frameClass = ''}) {
    this.body = body;
    this.exportLink = exportLink;
    this.overlay = loadingIndicator(loadingText, {overlay: true});
    /** The message slot: the page puts it above `element`, after its own controls. */
    this.message = h('div', {class: 'oc-message-slot'});
    /** The body with the spinner over it (the frame is what the spinner covers). */
    this.element = h('div', {class: frameClass ? `oc-body ${frameClass}` : 'oc-body'}, body, this.overlay);
    this.showBody(false);
  }

  /**
   * A request is under way: the spinner over what is on screen (the last document stays
   * under it, rather than the page going blank on each change), and no message.
   * @param {string} [text] what is read, where it changes with each request
   */
  loading(text) {
    if (text !== undefined) setText(this.overlay.querySelector('.oc-loading-text'), text);
    this.overlay.hidden = false;
    this.message.replaceChildren();
  }

  /** The document arrived: the body (the page fills it now) and its export link. */
  loaded() {
    this.overlay.hidden = true;
    this.message.replaceChildren();
    this.showBody(true);
  }

  /**
   * Nothing to show: `nodes` (an error box, or a note on why and what to do, with its
   * buttons) in place of the body, which is hidden with its export link.
   * @param {...(Node|string)} nodes
   */
  showMessage(...nodes) {
    this.overlay.hidden = true;
    this.showBody(false);
    this.message.replaceChildren(...nodes);
  }

  /** @param {boolean} shown */
  showBody(shown) {
    this.body.hidden = !shown;
    if (this.exportLink) this.exportLink.hidden = !shown;
  }
}
