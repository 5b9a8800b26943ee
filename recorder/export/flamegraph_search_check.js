// Runs the flame graph's own embedded script (from the SVG's CDATA) on the
// SVG's own frames, in node, and prints what a user would see after each
// step of a search. Usage: node flamegraph_search_check.js FILE.svg REGEX...
// Output: one JSON object per REGEX, then one after the reset:
//   {"term", "matched" (the #matched text), "button" (the search button's
//    text), "highlighted" (labels of frames with class hl), "pct"}.
// The DOM here is a stand-in just big enough for the script (elements with
// attributes, classList, textContent); the logic under test is the SVG's.
"use strict";
const fs = require("fs");
const vm = require("vm");

const svg = fs.readFileSync(process.argv[2], "utf8");
const script = /<script><!\[CDATA\[([\s\S]*?)\]\]><\/script>/.exec(svg);
if (!script) throw new Error("no embedded script");

function unescapeXml(s) {
  return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"')
      .replace(/&apos;/g, "'").replace(/&amp;/g, "&");
}
class El {
  constructor(tag, attrs, text) {
    this.tag = tag;
    this.attrs = Object.assign({}, attrs);
    this.children = [];
    this.style = {};
    this.classes = new Set((attrs.class || "").split(" ").filter(Boolean));
    this.textContent = text;
    this.firstChild = {nodeValue: text};
    const self = this;
    this.classList = {
      add: (c) => self.classes.add(c), remove: (c) => self.classes.delete(c),
      contains: (c) => self.classes.has(c)};
  }
  getAttribute(k) { return k in this.attrs ? String(this.attrs[k]) : null; }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  getElementsByTagName(t) {
    const out = [];
    const walk = (e) => { for (const c of e.children) { if (c.tag === t) out.push(c); walk(c); } };
    walk(this);
    return out;
  }
}
function attrsOf(s) {
  const a = {};
  for (const m of s.matchAll(/([\w-]+)="([^"]*)"/g)) a[m[1]] = unescapeXml(m[2]);
  return a;
}
// The elements the script reads: the frame groups and the named texts.
const framesEl = new El("g", {id: "frames"}, "");
const frameRe = /<g ([^>]*)><title>([^<]*)<\/title><rect ([^>]*)\/><text ([^>]*)>([^<]*)<\/text><\/g>/g;
for (const m of svg.matchAll(frameRe)) {
  const g = new El("g", attrsOf(m[1]), "");
  const title = new El("title", {}, unescapeXml(m[2]));
  g.children.push(title, new El("rect", attrsOf(m[3]), ""), new El("text", attrsOf(m[4]), unescapeXml(m[5])));
  framesEl.children.push(g);
}
const byId = {frames: framesEl};
for (const m of svg.matchAll(/<text ([^>]*id="[^"]*"[^>]*)>([^<]*)<\/text>/g)) {
  const a = attrsOf(m[1]);
  byId[a.id] = new El("text", a, unescapeXml(m[2]));
}
const context = {
  document: {getElementById: (id) => byId[id] || null},
  window: {addEventListener: () => {}},
  prompt: () => null,
};
vm.createContext(context);
vm.runInContext(script[1], context);
vm.runInContext("init({})", context);

function state(term) {
  const hl = framesEl.children.filter((g) => g.classes.has("hl"))
      .map((g) => g.children[2].getAttribute("data-label"));
  const m = /Matched: ([0-9.]+)%/.exec(byId.matched.textContent);
  return {term: term, matched: byId.matched.textContent, button: byId.search.textContent,
          highlighted: hl, pct: m ? parseFloat(m[1]) : null};
}
for (const term of process.argv.slice(3)) {
  // The Search button asks for the term: answer it, click.
  context.prompt = () => term;
  vm.runInContext("search_prompt()", context);
  console.log(JSON.stringify(state(term)));
  // A second click on the button, now "Reset Search", clears the search.
  if (term !== process.argv[process.argv.length - 1]) vm.runInContext("reset_search()", context);
}
// The last search is reset by clicking the button, as a user would.
vm.runInContext("search_prompt()", context);
console.log(JSON.stringify(state(null)));
