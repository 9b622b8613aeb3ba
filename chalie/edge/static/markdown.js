// A small, safe Markdown renderer for Chalie's answers.
// The whole text is HTML-escaped FIRST, so raw HTML in an answer is always shown as text; only
// then is Markdown syntax turned into a fixed set of tags. Links keep only http:, https: and
// mailto: URLs. Nothing inside code (fenced blocks or inline spans) is transformed.

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value) {
  return String(value).replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

// Placeholders for finished inline HTML: \u0000<n>\u0000 (NUL is removed from the input first).
const HOLE = /\u0000(\d+)\u0000/g;
const HAS_HOLE = /\u0000\d+\u0000/;

const FENCE = /^\s{0,3}```/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const RULE = /^\s{0,3}([-*_])(?:\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}&gt;\s?/;
const LIST_ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$/;

const MAX_QUOTE_DEPTH = 6;

export function renderMarkdown(text) {
  const escaped = escapeHtml(String(text ?? "").replace(/\u0000/g, "").replace(/\r\n?/g, "\n"));
  return renderBlocks(escaped.split("\n"), 0);
}

function isTableStart(lines, i) {
  return lines[i].includes("|") && i + 1 < lines.length && lines[i + 1].includes("-")
    && TABLE_SEP.test(lines[i + 1]);
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || LIST_ITEM.test(line) || isTableStart(lines, i);
}

// Block structure over already-escaped lines; returns HTML.
function renderBlocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    if (FENCE.test(line)) {
      const code = [];
      i += 1;
      while (i < lines.length && !FENCE.test(lines[i])) { code.push(lines[i]); i += 1; }
      i += 1; // the closing fence (an unclosed fence runs to the end, as while streaming)
      out.push(`<pre><code>${code.join("\n")}</code></pre>`);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = Math.min(6, heading[1].length + 2); // # -> h3 ... never h1/h2
      out.push(`<h${level}>${renderInline(heading[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (RULE.test(line)) { out.push("<hr>"); i += 1; continue; }
    if (QUOTE.test(line) && depth < MAX_QUOTE_DEPTH) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) { inner.push(lines[i].replace(QUOTE, "")); i += 1; }
      out.push(`<blockquote>${renderBlocks(inner, depth + 1)}</blockquote>`);
      continue;
    }
    if (isTableStart(lines, i)) { i = renderTable(lines, i, out); continue; }
    if (LIST_ITEM.test(line)) { i = renderList(lines, i, out); continue; }
    const para = [line.trim()];
    i += 1;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) { para.push(lines[i].trim()); i += 1; }
    out.push(`<p>${para.map(renderInline).join("<br>")}</p>`);
  }
  return out.join("\n");
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|")) row = row.slice(0, -1);
  return row.split("|").map((cell) => cell.trim());
}

function alignmentClass(spec) {
  const left = spec.startsWith(":");
  const right = spec.endsWith(":");
  if (left && right) return ' class="align-center"';
  if (right) return ' class="align-right"';
  return "";
}

function renderTable(lines, i, out) {
  const head = splitRow(lines[i]);
  const aligns = splitRow(lines[i + 1]).map(alignmentClass);
  const cells = (row, tag) => head.map((_, n) => `<${tag}${aligns[n] || ""}>${renderInline(row[n] ?? "")}</${tag}>`).join("");
  const body = [];
  i += 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
    body.push(`<tr>${cells(splitRow(lines[i]), "td")}</tr>`);
    i += 1;
  }
  out.push(`<div class="table-wrap"><table><thead><tr>${cells(head, "th")}</tr></thead>`
    + `<tbody>${body.join("")}</tbody></table></div>`);
  return i;
}

function listOpenTag(marker) {
  if (!/\d/.test(marker)) return "<ul>";
  const start = parseInt(marker, 10);
  return start === 1 ? "<ol>" : `<ol start="${start}">`;
}

// A list with one level of nesting: items indented 2+ spaces past the first item nest under
// the item before them; deeper indents stay at that one nested level.
function renderList(lines, i, out) {
  const first = LIST_ITEM.exec(lines[i]);
  const base = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items = []; // {parts: [inline text], children: [{marker, parts}]}
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      // A blank line continues the list only when the next item follows it.
      let next = i + 1;
      while (next < lines.length && !lines[next].trim()) next += 1;
      if (next < lines.length && LIST_ITEM.test(lines[next])
        && LIST_ITEM.exec(lines[next])[1].length >= base) { i = next; continue; }
      break;
    }
    const item = LIST_ITEM.exec(line);
    if (item && !RULE.test(line)) {
      const indent = item[1].length;
      const nested = indent >= base + 2 && items.length > 0;
      if (!nested && /\d/.test(item[2]) !== ordered) break; // a different kind of list starts
      if (nested) items[items.length - 1].children.push({ marker: item[2], parts: [item[3]] });
      else items.push({ parts: [item[3]], children: [] });
      i += 1;
      continue;
    }
    const indented = /^\s{2,}/.test(line);
    if (items.length && (indented || !startsBlock(lines, i)) && !/^\s*$/.test(line)) {
      // A continuation line of the last item (or of its last nested item).
      const last = items[items.length - 1];
      const target = last.children.length && indented ? last.children[last.children.length - 1] : last;
      target.parts.push(line.trim());
      i += 1;
      continue;
    }
    break;
  }
  const itemHtml = (parts) => parts.map(renderInline).join("<br>");
  const html = items.map((item) => {
    let sub = "";
    if (item.children.length) {
      const tag = listOpenTag(item.children[0].marker);
      const close = tag.startsWith("<ul") ? "</ul>" : "</ol>";
      sub = tag + item.children.map((c) => `<li>${itemHtml(c.parts)}</li>`).join("") + close;
    }
    return `<li>${itemHtml(item.parts)}${sub}</li>`;
  }).join("");
  out.push(ordered ? `${listOpenTag(first[2])}${html}</ol>` : `<ul>${html}</ul>`);
  return i;
}

function safeHref(url) {
  return /^(?:https?:|mailto:)/i.test(url) ? url : null;
}

// A bare URL without the punctuation that ends its sentence, or a ")" it did not open.
function trimAutolink(url) {
  let end = url.length;
  let unopened = (url.match(/\)/g) || []).length - (url.match(/\(/g) || []).length;
  while (end > 0) {
    const ch = url[end - 1];
    if (/[.,;:!?*_~]/.test(ch)) end -= 1;
    else if (ch === ")" && unopened > 0) { end -= 1; unopened -= 1; }
    else break;
  }
  return url.slice(0, end);
}

// Inline formatting over one escaped line: code spans first (kept verbatim), then links, then
// bare https:// URLs, then emphasis.
function renderInline(escapedText) {
  const stash = [];
  const hold = (html) => `\u0000${stash.push(html) - 1}\u0000`;
  let s = escapedText.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g,
    (_, _ticks, code) => hold(`<code>${code.trim() || code}</code>`));
  s = s.replace(/\[([^\]\n]+)\]\(\s*([^\s()]+(?:\([^\s()]*\)[^\s()]*)*)\s*\)/g, (whole, label, url) => {
    const href = safeHref(url);
    if (!href) return label;
    return hold(`<a href="${href}" rel="noopener noreferrer" target="_blank">${emphasis(label)}</a>`);
  });
  s = s.replace(/https:\/\/(?:[^\s&<\u0000]|&amp;)+/g, (match) => {
    const link = trimAutolink(match);
    return hold(`<a href="${link}" rel="noopener noreferrer" target="_blank">${link}</a>`)
      + match.slice(link.length);
  });
  s = emphasis(s);
  for (let round = 0; round < 4 && HAS_HOLE.test(s); round += 1) {
    s = s.replace(HOLE, (_, n) => stash[Number(n)]);
  }
  return s;
}

function emphasis(s) {
  return s
    .replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/~~(?=\S)([\s\S]*?\S)~~/g, "<del>$1</del>")
    .replace(/(^|[^*\w])\*(?=[^\s*])([\s\S]*?[^\s*])\*(?![*\w])/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>");
}
