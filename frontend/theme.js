// Light or dark, as TensorBoard is: its page's body carries `dark-mode` when the user (or
// the browser's preference) picks the dark theme. The tab follows it live.

const listeners = [];

function tensorBoardBody() {
  try {
    return window.parent !== window ? window.parent.document.body : null;
  } catch (error) {
    return null; // a parent we may not read: fall back to the browser's preference
  }
}

export function isDark() {
  const body = tensorBoardBody();
  if (body) return body.classList.contains('dark-mode');
  return window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
}

function apply() {
  document.documentElement.classList.toggle('oc-dark', isDark());
  for (const listener of listeners) listener();
}

/** Start following TensorBoard's theme; `onChange` runs after each switch. */
export function followTheme(onChange) {
  if (onChange) listeners.push(onChange);
  if (listeners.length > 1) return;
  apply();
  const body = tensorBoardBody();
  if (body) {
    const observer = new MutationObserver(apply);
    observer.observe(body, {attributes: true, attributeFilter: ['class']});
    // TensorBoard's body outlives this document (the frame may be loaded again)
    window.addEventListener('pagehide', () => observer.disconnect(), {once: true});
  } else if (window.matchMedia) {
    window.matchMedia('(prefers-color-scheme: dark)').addEventListener('change', apply);
  }
}

/** Plotly colours for the current theme, merged into a figure's layout. */
export function themedLayout(layout) {
  const dark = isDark();
  const text = dark ? '#e0e0e0' : '#424242';
  const grid = dark ? '#4a4a4a' : '#eeeeee';
  const axis = (existing) => existing ? {...existing, gridcolor: grid, linecolor: grid, zerolinecolor: grid,
                                         ...(existing.minor ? {minor: {...existing.minor, gridcolor: dark ? '#3a3a3a' : '#f7f7f7'}} : {})} : existing;
  return {
    ...layout,
    font: {...(layout.font || {}), color: text},
    xaxis: axis(layout.xaxis),
    yaxis: axis(layout.yaxis),
    ...(layout.yaxis2 ? {yaxis2: {...layout.yaxis2, linecolor: grid}} : {}),
    paper_bgcolor: 'rgba(0,0,0,0)',
    plot_bgcolor: 'rgba(0,0,0,0)',
    ...(layout.shapes ? {shapes: layout.shapes} : {}),
  };
}
