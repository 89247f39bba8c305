// The tab's numbers and names (frontend/format.js) on the golden cases that the CLI's
// (tb_opcompare/text.py) runs too: a figure reads the same wherever it is shown.
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import {test} from 'node:test';

import {formatBreakeven, formatBytes, formatCount, formatInterval, formatLevel, formatRate, formatShare, formatSignedTime,
  formatSpeedup, formatThroughput, formatTime, headlineText, shortenNames, visibleText} from '../../frontend/format.js';

const cases = JSON.parse(readFileSync(new URL('../golden/text_cases.json', import.meta.url), 'utf8'));
const formatters = {
  format_time: formatTime, format_signed_time: formatSignedTime, format_share: formatShare,
  format_speedup: formatSpeedup, format_count: formatCount, format_throughput: formatThroughput,
  format_bytes: formatBytes, format_level: formatLevel,
};

for (const [name, format] of Object.entries(formatters)) {
  test(name, () => {
    for (const [value, expected] of cases[name]) assert.equal(format(value), expected, `${name}(${value})`);
  });
}

test('format_breakeven', () => {
  for (const [[batchSize, targetFaster, target], expected] of cases.format_breakeven) {
    assert.equal(formatBreakeven(batchSize, targetFaster, target), expected,
                 `format_breakeven(${batchSize}, ${targetFaster}, ${target})`);
  }
});

test('format_rate', () => {
  for (const [[value, unit], expected] of cases.format_rate) assert.equal(formatRate(value, unit), expected, `format_rate(${value})`);
});

test('format_interval', () => {
  for (const [[low, high, level], expected] of cases.format_interval) {
    assert.equal(formatInterval(low, high, level), expected, `format_interval(${low}, ${high}, ${level})`);
  }
});

test('escape_control_characters', () => {
  for (const [value, expected] of cases.escape_control_characters) assert.equal(visibleText(value), expected, value);
  // the page keeps line breaks and tabs (tooltips break lines with them); the CLI does not
  assert.equal(visibleText('a\nb\tc\rd'), 'a\nb\tc\\x0dd');
});

test('shorten_names', () => {
  for (const {names, length, keep, expected} of cases.shorten_names) {
    assert.deepEqual(shortenNames(names, length, keep), expected, JSON.stringify({names, length, keep}));
  }
});

test('the headline line of Modules and Layers reads as Compare\'s first card', () => {
  const headline = {speedup: 13.328, per_sample: false, text: 'step wall time: one step each, 15.6 ms vs 1.17 ms'};
  assert.equal(headlineText(headline),
    'Whole step: 13.3× faster on the target (step wall time: one step each, 15.6 ms vs 1.17 ms)');
  assert.equal(headlineText({...headline, speedup: 0.5, per_sample: true}),
    'Whole step, per sample: 0.50× slower on the target (step wall time: one step each, 15.6 ms vs 1.17 ms)');
  assert.match(headlineText({...headline, speedup: null}), /^Whole step: no speedup \(/);
});
