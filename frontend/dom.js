// Building the page. Everything that reaches it goes through h(), which only ever creates
// text nodes: op and run names come from user files and must never be parsed as HTML,
// and their invisible and bidirectional characters are shown (visibleText), in text and
// tooltips alike, so that no name reads as another.

import {visibleText} from './format.js';

/**
 * Create an element; children are nodes or strings (strings become text nodes), arrays
 * of them are flattened, and null/undefined/false are left out.
 * @param {string} tag
 * @param {Object<string, *>} [attributes] `class`, `style` (an object), `on<event>`
 *   listeners, else attributes (true: present and empty; null/undefined/false: absent)
 * @param {...*} children
 * @returns {HTMLElement}
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'class') element.className = value;
    else if (name.startsWith('on')) element.addEventListener(name.slice(2), value);
    else if (name === 'style' && typeof value === 'object') Object.assign(element.style, value);
    else if (name === 'title' || name === 'aria-label') element.setAttribute(name, visibleText(value));
    else element.setAttribute(name, value === true ? '' : String(value));
  }
  appendChildren(element, children);
  return element;
}

/** Append each child (a node, else text as h() writes it), skipping null, undefined and false. */
function appendChildren(element, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(visibleText(child)));
  }
}

/**
 * An element's children replaced, as h() takes them: where a child may be null (shown
 * only sometimes), not `element.replaceChildren`, which writes a null as the text "null".
 */
export function replaceContent(element, ...children) {
  element.replaceChildren();
  appendChildren(element, children);
}

/** Set an element's text, as h() writes it. */
export function setText(element, text) {
  element.textContent = visibleText(text);
}

/** Load a stylesheet once, however often the tab is rendered. */
export function addStylesheet(href) {
  if (document.querySelector('link[data-op-compare]')) return;
  document.head.append(h('link', {rel: 'stylesheet', href, 'data-op-compare': true}));
}
