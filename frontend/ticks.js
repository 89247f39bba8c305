// Round ticks for the tab's log axes (speedups, times): plotly's own log ticks jump by
// powers of ten and leave a narrow range bare.

/**
 * Round ticks for a log axis from `low` to `high`: 1, 2 and 5 times a power of ten, or
 * every digit where the range is narrow, two significant digits where it is narrower still;
 * each labelled by `label`. Null where none fits, to leave them to plotly.
 * @param {number} low
 * @param {number} high
 * @param {(value: number) => string} label
 * @returns {{tickvals: number[], ticktext: string[]}|null}
 */
export function roundLogTicks(low, high, label) {
  if (!(low > 0) || !(high > low) || !Number.isFinite(high)) return null;
  const decades = Math.ceil(Math.log10(high)) - Math.floor(Math.log10(low));
  // A wide range (a pooled interval of very different runs) gets powers of ten, at most
  // MAX_TICKS of them: 1, 2 and 5 in each of fifteen decades pile up as an unreadable column.
  // A narrow one (one run's step, 140k-170k µs) holds no 1-9 x 10^n at all: two significant
  // digits then, or plotly's own ticks would show bare numbers without a unit.
  const choices = decades > MAX_TICKS / 3 ? [[1]] : [[1, 2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9], TWO_DIGITS];
  for (const steps of choices) {
    let values = [];
    for (let exponent = Math.floor(Math.log10(low)); exponent <= Math.ceil(Math.log10(high)); exponent++) {
      for (const step of steps) {
        const value = Number((step * 10 ** exponent).toPrecision(2));
        if (value >= low && value <= high) values.push(value);
      }
    }
    if (values.length > MAX_TICKS) {
      const every = Math.ceil(values.length / MAX_TICKS);
      values = values.filter((value, i) => i % every === 0);
    }
    if (values.length >= 3 || (steps === TWO_DIGITS && values.length)) {
      return {tickvals: values, ticktext: values.map(label)};
    }
  }
  return null;
}

const MAX_TICKS = 12;
const TWO_DIGITS = Array.from({length: 90}, (_, i) => (10 + i) / 10); // 1.0, 1.1 … 9.9
