// Text rendering without raw HTML: a small Markdown subset for agent
// answers and a small syntax highlighter for files and code blocks. Both
// build Preact nodes, so nothing the agent or a file says becomes markup.
import { html } from './vendor/preact-htm.js';

const KEYWORDS = new Set(('break case catch class const continue def default defer do elif else enum export extends false ' +
  'finally fn for from func function go if impl import in interface let match mod new nil none null package pub ' +
  'return self static struct super switch this throw true try type typeof undefined use var void while with yield ' +
  'async await lambda pass raise and or not is echo then fi esac done local readonly').split(' '));

const HASH_COMMENTS = /\.(py|sh|bash|zsh|rb|ya?ml|toml|conf|ini|r|pl|mk)$|(^|\/)(Makefile|Dockerfile|\.gitignore)$/i;

const TOKEN = /(\/\/.*$|\/\*.*?\*\/|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`|\b\d[\d_.xXa-fA-F]*\b|\b[A-Za-z_]\w*\b)/g;
const TOKEN_HASH = /(#.*$|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|\b\d[\d_.xXa-fA-F]*\b|\b[A-Za-z_]\w*\b)/g;

// highlightLine splits one line of code into spans by token class.
export function highlightLine(line, path) {
  const re = HASH_COMMENTS.test(path || '') ? TOKEN_HASH : TOKEN;
  re.lastIndex = 0;
  const out = [];
  let last = 0;
  for (let m; (m = re.exec(line));) {
    const t = m[0];
    let cls = '';
    if (t.startsWith('//') || t.startsWith('/*') || t.startsWith('#')) cls = 'tk-com';
    else if (/^["'`]/.test(t)) cls = 'tk-str';
    else if (/^\d/.test(t)) cls = 'tk-num';
    else if (KEYWORDS.has(t)) cls = 'tk-kw';
    if (!cls) continue;
    if (m.index > last) out.push(line.slice(last, m.index));
    out.push(html`<span class=${cls}>${t}</span>`);
    last = m.index + t.length;
  }
  if (last < line.length) out.push(line.slice(last));
  return out;
}

function inline(text) {
  const out = [];
  const re = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*|\[[^\]]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0;
  for (let m; (m = re.exec(text));) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const t = m[0];
    if (t[0] === '`') out.push(html`<code>${t.slice(1, -1)}</code>`);
    else if (t.startsWith('**')) out.push(html`<strong>${t.slice(2, -2)}</strong>`);
    else if (t[0] === '*') out.push(html`<em>${t.slice(1, -1)}</em>`);
    else out.push(html`<a href=${m[2]} target="_blank" rel="noopener noreferrer">${t.slice(1, t.indexOf(']'))}</a>`);
    last = m.index + t.length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

// markdown renders headings, lists, fenced code blocks and paragraphs with
// inline code, bold, italics and http(s) links. An unclosed fence (text
// still streaming) renders as a code block so far.
export function markdown(src) {
  const lines = src.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length;) {
    const line = lines[i];
    const fence = /^\s*```\s*([\w+-]*)/.exec(line);
    if (fence) {
      const code = [];
      for (i++; i < lines.length && !/^\s*```/.test(lines[i]); i++) code.push(lines[i]);
      i++;
      const name = 'x.' + (fence[1] || 'txt');
      blocks.push(html`<pre class="code"><code>${code.map((l) => html`<span class="ln">${highlightLine(l, name)}</span>`)}</code></pre>`);
      continue;
    }
    const h = /^(#{1,4})\s+(.*)/.exec(line);
    if (h) { blocks.push(html`<p class="md-h">${inline(h[2])}</p>`); i++; continue; }
    if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
      const items = [];
      const ordered = /^\s*\d+\./.test(line);
      for (; i < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[i]); i++) items.push(lines[i].replace(/^\s*([-*]|\d+\.)\s+/, ''));
      const li = items.map((t) => html`<li>${inline(t)}</li>`);
      blocks.push(ordered ? html`<ol>${li}</ol>` : html`<ul>${li}</ul>`);
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const para = [];
    for (; i < lines.length && lines[i].trim() && !/^\s*```|^#{1,4}\s|^\s*([-*]|\d+\.)\s+/.test(lines[i]); i++) para.push(lines[i]);
    blocks.push(html`<p>${inline(para.join('\n'))}</p>`);
  }
  return blocks;
}
