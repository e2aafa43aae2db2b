// Tokenizes every .mqb file of the repository (examples/, testdata/,
// lang/testdata/, including the .mqb sections of .txtar archives) with the
// real TextMate engine (vscode-textmate + vscode-oniguruma, as VS Code
// does) and checks mqb.tmLanguage.json: a table of tokens gets the scopes
// it should, and no text is left with only the base scope source.mqb.
//
// Run: bash editors/vscode/test/run.sh   (npm ci, then node --test)
'use strict';

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const vsctm = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const root = path.resolve(__dirname, '..', '..', '..');
const grammarPath = path.join(__dirname, '..', 'syntaxes', 'mqb.tmLanguage.json');

async function loadGrammar() {
  const wasm = fs.readFileSync(require.resolve('vscode-oniguruma/release/onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  // VS Code ships a SQL grammar; the test uses the same one, as packaged
  // for Shiki, so the injection into """ blocks is exercised for real.
  const sql = (await import('@shikijs/langs/sql')).default.find((g) => g.scopeName === 'source.sql');
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName === 'source.mqb') {
        return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath);
      }
      if (scopeName === 'source.sql') {
        return JSON.parse(JSON.stringify(sql));
      }
      return null;
    },
  });
  return registry.loadGrammar('source.mqb');
}

// tokenize returns, per line, the tokens with their text and scopes.
function tokenize(grammar, text) {
  let state = vsctm.INITIAL;
  return text.split('\n').map((line) => {
    const r = grammar.tokenizeLine(line, state);
    state = r.ruleStack;
    return r.tokens.map((t) => ({ start: t.startIndex, text: line.slice(t.startIndex, t.endIndex), scopes: t.scopes }));
  });
}

// indexOfWord finds text in line, as a whole word when it is one.
function indexOfWord(line, text) {
  const esc = text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(/^\w/.test(text) ? `(?<!\\w)${esc}(?!\\w)` : esc).exec(line);
  return m ? m.index : -1;
}

// txtarSections returns the files of a txtar archive.
function txtarSections(text) {
  const out = [];
  let cur = null;
  for (const line of text.split('\n')) {
    const m = /^-- (.+) --$/.exec(line);
    if (m) {
      cur = { name: m[1].trim(), lines: [] };
      out.push(cur);
    } else if (cur) {
      cur.lines.push(line);
    }
  }
  return out.map((s) => ({ name: s.name, text: s.lines.join('\n') }));
}

// mqbSources lists every .mqb text under the given directories.
function mqbSources() {
  const out = [];
  const walk = (dir) => {
    if (!fs.existsSync(dir)) return;
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules' && e.name !== 'fuzz') walk(p);
      } else if (e.name.endsWith('.mqb')) {
        out.push({ name: path.relative(root, p), text: fs.readFileSync(p, 'utf8') });
      } else if (e.name.endsWith('.txtar')) {
        for (const s of txtarSections(fs.readFileSync(p, 'utf8'))) {
          if (s.name.endsWith('.mqb')) out.push({ name: `${path.relative(root, p)}#${s.name}`, text: s.text });
        }
      }
    }
  };
  for (const d of ['examples', 'testdata', path.join('lang', 'testdata')]) walk(path.join(root, d));
  return out;
}

const design = txtarSections(fs.readFileSync(path.join(root, 'lang', 'testdata', 'format', 'design.txtar'), 'utf8'))
  .find((s) => s.name === 'in.mqb').text;

const extra = `output enrich = http { url = "http://\${env("HOST")}/x", timeout = 500ms }
input src = kafka { url = "127.0.0.1:9092", topic = "orders" }
route r {
  concurrency = 4
  from ref src
  filter payload.total > 1.5 && payload.kind in ["a", "b"] // keep
  map {
    total = payload.total * 2
  }
  retry { attempts = 3, backoff = 100ms }
  to switch {
    on = meta["x"]
    case "a" { to ref enrich }
    default { to object_store { url = "file:///tmp/o", name_by = source_position, date_partition = false } }
  }
  bad = 10years
}
`;

// Each row: a line fragment that identifies the line, the token's text,
// and a scope the token must carry.
const table = [
  ['route orders_to_db', 'route', 'keyword.control.route.mqb'],
  ['route orders_to_db', 'orders_to_db', 'entity.name.function.route.mqb'],
  ['guarantee effectively_once', 'guarantee', 'keyword.control.mqb'],
  ['guarantee effectively_once', 'effectively_once', 'constant.language.guarantee.mqb'],
  ['from file {', 'from', 'keyword.control.mqb'],
  ['from file {', 'file', 'support.type.kind.mqb'],
  ['path = "orders.jsonl"', 'path', 'entity.other.attribute-name.mqb'],
  ['path = "orders.jsonl"', 'orders.jsonl', 'string.quoted.double.mqb'],
  ['# Comments run', '#', 'punctuation.definition.comment.mqb'],
  ['# Comments run', 'Comments', 'comment.line.number-sign.mqb'],
  ['# JSON lines', 'mode', 'comment.line.number-sign.mqb'],
  ['id payload.order_id', 'id', 'support.function.step.mqb'],
  ['id payload.order_id', 'payload', 'variable.language.mqb'],
  ['dedup {', 'dedup', 'support.function.step.mqb'],
  ['key   = meta', 'key', 'entity.other.attribute-name.mqb'],
  ['ttl   = 1h', '1h', 'constant.numeric.duration.mqb'],
  ['to sql {', 'sql', 'support.type.kind.mqb'],
  ['insert_query = """', 'insert_query', 'entity.other.attribute-name.mqb'],
  ['INSERT INTO orders', 'INSERT', 'source.sql'],
  ['INSERT INTO orders', 'INSERT', 'keyword.other.DML'],
  ['VALUES (${meta', 'VALUES', 'keyword.other.DML'],
  ['VALUES (${meta', '${', 'punctuation.section.embedded.begin.mqb'],
  ['VALUES (${meta', 'meta', 'meta.embedded.expression.mqb'],
  ['VALUES (${meta', 'meta', 'variable.language.mqb'],
  ['VALUES (${meta', 'body', 'source.expr.mqb'],
  ['ON CONFLICT', 'ON CONFLICT', 'source.sql'],
  ['output enrich', 'output', 'keyword.control.endpoint.mqb'],
  ['output enrich', 'http', 'support.type.kind.mqb'],
  ['output enrich', 'env', 'support.function.builtin.mqb'],
  ['output enrich', 'env', 'meta.embedded.expression.mqb'],
  ['output enrich', '500ms', 'constant.numeric.duration.mqb'],
  ['from ref src', 'ref', 'keyword.control.mqb'],
  ['from ref src', 'src', 'entity.name.type.endpoint.mqb'],
  ['concurrency = 4', 'concurrency', 'entity.other.attribute-name.mqb'],
  ['concurrency = 4', '4', 'constant.numeric.integer.mqb'],
  ['filter payload', 'filter', 'support.function.step.mqb'],
  ['filter payload', '1.5', 'constant.numeric.float.mqb'],
  ['filter payload', '&&', 'keyword.operator.mqb'],
  ['filter payload', 'in', 'keyword.operator.word.mqb'],
  ['filter payload', 'keep', 'comment.line.double-slash.mqb'],
  ['total = payload', 'total', 'variable.other.property.mqb'],
  ['retry {', 'retry', 'support.function.step.mqb'],
  ['case "a"', 'case', 'keyword.control.mqb'],
  ['default {', 'default', 'keyword.control.mqb'],
  ['default {', 'object_store', 'support.type.kind.mqb'],
  ['default {', 'source_position', 'constant.other.enum.mqb'],
  ['default {', 'false', 'constant.language.boolean.mqb'],
  ['bad = 10years', '10years', 'invalid.illegal.numeric.mqb'],
];

test('token scopes', async () => {
  const grammar = await loadGrammar();
  const lines = [...tokenize(grammar, design), ...tokenize(grammar, extra)];
  const texts = [...design.split('\n'), ...extra.split('\n')];
  for (const [fragment, text, scope] of table) {
    const i = texts.findIndex((l) => l.includes(fragment));
    assert.notStrictEqual(i, -1, `no line contains ${JSON.stringify(fragment)}`);
    const at = indexOfWord(texts[i], text);
    assert.notStrictEqual(at, -1, `${JSON.stringify(text)} is not on line ${JSON.stringify(texts[i])}`);
    const tok = lines[i].filter((t) => t.start <= at).pop();
    assert.ok(tok.scopes.some((s) => s === scope || s.startsWith(`${scope}.`)), `${JSON.stringify(text)} has scopes ${tok.scopes.join(' ')}, want ${scope}`);
  }
});

test('every line of every .mqb file is tokenized', async () => {
  const grammar = await loadGrammar();
  const sources = mqbSources();
  assert.ok(sources.length > 0, 'found no .mqb sources');
  for (const src of sources) {
    tokenize(grammar, src.text).forEach((toks, n) => {
      for (const t of toks) {
        if (t.scopes.length === 1 && t.text.trim() !== '') {
          assert.fail(`${src.name}:${n + 1}: ${JSON.stringify(t.text)} has no scope beyond source.mqb`);
        }
      }
    });
  }
});

test('valid files have no illegal tokens', async () => {
  const grammar = await loadGrammar();
  const valid = (s) => s.name.startsWith('examples') || (s.name.startsWith(path.join('lang', 'testdata', 'format')) && !s.name.includes('error.txtar'));
  for (const src of mqbSources().filter(valid)) {
    tokenize(grammar, src.text).forEach((toks, n) => {
      for (const t of toks) {
        assert.ok(!t.scopes.some((s) => s.startsWith('invalid.')), `${src.name}:${n + 1}: ${JSON.stringify(t.text)} is ${t.scopes.join(' ')}`);
      }
    });
  }
});
