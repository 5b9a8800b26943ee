// Folded stacks and the interactive SVG flame graph: both aggregate samples
// by their outermost-first stack.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "recorder/export/exporters.h"

namespace flightrec::recorder::exporter {

std::vector<std::string> OuterFirstNames(const analysis::ResolvedSample& s) {
  std::vector<std::string> names;
  names.reserve(s.stack.size() + 1);
  names.push_back(s.sample->comm.empty() ? std::to_string(s.sample->pid) : s.sample->comm);
  if (std::string marker = IncompleteStackMarker(*s.sample); !marker.empty()) {
    names.push_back(std::move(marker));
  }
  for (auto it = s.stack.rbegin(); it != s.stack.rend(); ++it) {
    std::string n = (*it)->Display();
    if ((*it)->inlined) n += " [inlined]";
    names.push_back(std::move(n));
  }
  return names;
}

namespace {

class Folded : public Exporter {
 public:
  void Begin(const analysis::RecordInfo&, std::ostream* out) override { out_ = out; }
  void Add(const analysis::ResolvedSample& s) override {
    std::vector<std::string> names = OuterFirstNames(s);
    // An off-CPU interval: marked below the thread, weighing its
    // microseconds (as offcputime -f folds them).
    if (s.off_cpu != nullptr) {
      names.insert(names.begin() + 1, fmt::format("[off-cpu:{}]", s.off_cpu->state));
    }
    std::string line;
    for (const auto& n : names) {
      if (!line.empty()) line += ';';
      line += FoldedName(n);
    }
    counts_[line] += s.off_cpu != nullptr ? std::max<uint64_t>(1, s.sample->period / 1000) : 1;
  }
  Status Finish() override {
    for (const auto& [stack, n] : counts_) *out_ << stack << ' ' << n << '\n';
    return OkStatus();
  }

 private:
  std::ostream* out_ = nullptr;
  std::map<std::string, uint64_t> counts_;
};

// A node of the merged call tree.
struct Node {
  std::string name;
  uint64_t total = 0;
  std::map<std::string, std::unique_ptr<Node>> children;
};

// A self-contained SVG in the shape of Brendan Gregg's flamegraph.pl output:
// frames as rects with <title> tooltips, click to zoom, Ctrl-F / the Search
// button to highlight matches and show "Matched: x%" of all samples, the
// same button (then "Reset Search") or Escape to clear it; no external
// resources. Each frame's <g> carries its sample count (data-samples).
class FlameGraph : public Exporter {
 public:
  explicit FlameGraph(std::string title) : title_(std::move(title)) {}
  void Begin(const analysis::RecordInfo& info, std::ostream* out) override {
    out_ = out;
    if (title_.empty()) title_ = "flightrec record " + info.id;
  }
  void Add(const analysis::ResolvedSample& s) override {
    Node* n = &root_;
    n->total++;
    for (auto& name : OuterFirstNames(s)) {
      auto& child = n->children[name];
      if (!child) {
        child = std::make_unique<Node>();
        child->name = name;
      }
      n = child.get();
      n->total++;
    }
    depth_ = std::max(depth_, s.stack.size() + 2);
  }
  Status Finish() override {
    constexpr double kWidth = 1200, kPad = 10, kFrame = 16;
    const double height = (depth_ + 1) * kFrame + 70;
    std::ostream& o = *out_;
    o << "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      << fmt::format(
             "<svg version=\"1.1\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
             "xmlns=\"http://www.w3.org/2000/svg\" onload=\"init(evt)\">\n",
             kWidth, height, kWidth, height)
      << "<style>text{font-family:Verdana,sans-serif;font-size:12px;fill:#000}"
         ".f rect{stroke:#fff;stroke-width:0.5} .f:hover rect{stroke:#000}"
         "#search{cursor:pointer} .hl rect{fill:#e040e0 !important}</style>\n"
      << "<script><![CDATA[\n"
      << kScript << "\n]]></script>\n"
      << fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#f8f8f8\"/>\n",
                     kWidth, height)
      << fmt::format(
             "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">{}"
             "</text>\n",
             kWidth / 2, XmlEscape(title_))
      << fmt::format(
             "<text id=\"unzoom\" x=\"{}\" y=\"24\" style=\"opacity:0;cursor:pointer\" "
             "onclick=\"unzoom()\">Reset zoom</text>\n",
             kPad)
      << fmt::format(
             "<text id=\"search\" x=\"{}\" y=\"24\" text-anchor=\"end\" "
             "onclick=\"search_prompt()\">Search</text>\n",
             kWidth - kPad)
      << fmt::format("<text id=\"details\" x=\"{}\" y=\"{}\"> </text>\n", kPad, height - 8)
      << fmt::format("<text id=\"matched\" x=\"{}\" y=\"{}\" text-anchor=\"end\"> </text>\n",
                     kWidth - kPad, height - 8)
      << "<g id=\"frames\">\n";
    const double scale = root_.total ? (kWidth - 2 * kPad) / root_.total : 0;
    // Depth-first, children in name order (like flamegraph.pl: x is not time).
    struct Item {
      const Node* n;
      double x;
      size_t depth;
    };
    std::vector<Item> todo = {{&root_, kPad, 0}};
    while (!todo.empty()) {
      Item it = todo.back();
      todo.pop_back();
      const Node* n = it.n;
      double w = n->total * scale;
      double y = height - 40 - (it.depth + 1) * kFrame;
      std::string name = it.depth == 0 ? "all" : n->name;
      double pct = root_.total ? 100.0 * n->total / root_.total : 0;
      std::string tip = fmt::format("{} ({} samples, {:.2f}%)", name, n->total, pct);
      o << fmt::format(
          "<g class=\"f\" data-samples=\"{}\"><title>{}</title><rect x=\"{:.2f}\" y=\"{:.1f}\" "
          "width=\"{:.2f}\" height=\"{}\" fill=\"{}\" rx=\"2\"/><text x=\"{:.2f}\" "
          "y=\"{:.1f}\">{}</text></g>\n",
          n->total, XmlEscape(tip), it.x, y, w, kFrame - 1, Colour(name), it.x + 3, y + kFrame - 4,
          XmlEscape(Fit(name, w)));
      double x = it.x;
      std::vector<Item> kids;
      for (const auto& [k, c] : n->children) {
        kids.push_back({c.get(), x, it.depth + 1});
        x += c->total * scale;
      }
      for (auto k = kids.rbegin(); k != kids.rend(); ++k) todo.push_back(*k);
    }
    o << "</g>\n</svg>\n";
    return o.good() ? OkStatus() : Status(StatusCode::kInternal, "writing the SVG failed");
  }

 private:
  // Warm colours, stable per name (like flamegraph.pl's "hot" palette).
  static std::string Colour(const std::string& name) {
    uint32_t h = 2166136261u;
    for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
    return fmt::format("rgb({},{},{})", 205 + h % 50, (h >> 8) % 230, (h >> 16) % 55);
  }
  // The label that fits in w pixels (about 7 px per character).
  static std::string Fit(const std::string& name, double w) {
    size_t chars = w > 21 ? static_cast<size_t>((w - 6) / 7) : 0;
    if (chars >= name.size()) return name;
    if (chars < 3) return "";
    return name.substr(0, chars - 2) + "..";
  }

  static constexpr const char* kScript = R"JS(
var frames, details, unzoombtn, searchbtn, matchedtxt, searching = null;
function init(evt) {
  frames = document.getElementById("frames");
  details = document.getElementById("details").firstChild;
  unzoombtn = document.getElementById("unzoom");
  searchbtn = document.getElementById("search");
  matchedtxt = document.getElementById("matched");
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var r = gs[i].getElementsByTagName("rect")[0], t = gs[i].getElementsByTagName("text")[0];
    r.setAttribute("data-x", r.getAttribute("x"));
    r.setAttribute("data-w", r.getAttribute("width"));
    t.setAttribute("data-label", gs[i].getElementsByTagName("title")[0].textContent.replace(/ \([0-9]+ samples.*$/, ""));
    gs[i].onclick = function() { zoom(this); };
    gs[i].onmouseover = function() { details.nodeValue = this.getElementsByTagName("title")[0].textContent; };
    gs[i].onmouseout = function() { details.nodeValue = " "; };
  }
  window.addEventListener("keydown", function(e) {
    if (e.ctrlKey && e.keyCode === 70) { e.preventDefault(); search_prompt(true); }
    else if (e.keyCode === 27) reset_search();
  });
}
function label(g, w) {
  var t = g.getElementsByTagName("text")[0], s = t.getAttribute("data-label");
  var n = Math.floor((w - 6) / 7);
  t.textContent = w < 21 ? "" : (n >= s.length ? s : s.substring(0, n - 2) + "..");
}
function place(g, x, w) {
  var r = g.getElementsByTagName("rect")[0], t = g.getElementsByTagName("text")[0];
  r.setAttribute("x", x); r.setAttribute("width", Math.max(w, 0));
  t.setAttribute("x", x + 3); label(g, w);
  g.style.display = w <= 0 ? "none" : "";
}
function zoom(node) {
  var r = node.getElementsByTagName("rect")[0];
  var x0 = parseFloat(r.getAttribute("data-x")), w0 = parseFloat(r.getAttribute("data-w"));
  var y0 = parseFloat(r.getAttribute("y")), full = 1200 - 20, k = full / w0;
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var a = gs[i].getElementsByTagName("rect")[0];
    var x = parseFloat(a.getAttribute("data-x")), w = parseFloat(a.getAttribute("data-w"));
    var y = parseFloat(a.getAttribute("y"));
    if (x + w <= x0 + 1e-6 || x >= x0 + w0 - 1e-6) { place(gs[i], 0, 0); continue; }
    if (y > y0) { place(gs[i], 10, full); continue; }  // ancestors span the width
    place(gs[i], 10 + (x - x0) * k, w * k);
  }
  unzoombtn.style.opacity = "1";
}
function unzoom() {
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) {
    var a = gs[i].getElementsByTagName("rect")[0];
    place(gs[i], parseFloat(a.getAttribute("data-x")), parseFloat(a.getAttribute("data-w")));
  }
  unzoombtn.style.opacity = "0";
}
// Pure: which frames match re, and the share of all samples under them.
// frames: [{label, x, w, n}] (x, w unzoomed). A match inside a matching
// frame adds nothing (its samples are its ancestor's already), as in
// flamegraph.pl; total is the root's (the widest frame's) samples.
function search_match(frames, re) {
  var hits = [], total = 0, i;
  for (i = 0; i < frames.length; i++) {
    total = Math.max(total, frames[i].n);
    if (re.test(frames[i].label)) hits.push(i);
  }
  var order = hits.slice().sort(function(a, b) {
    return frames[a].x - frames[b].x || frames[b].w - frames[a].w;
  });
  var samples = 0, end = -Infinity;
  for (i = 0; i < order.length; i++) {
    var f = frames[order[i]];
    if (f.x < end - 1e-6) continue;  // inside a counted match
    samples += f.n;
    end = f.x + f.w;
  }
  return {hits: hits, samples: samples, total: total,
          pct: total ? 100 * samples / total : 0};
}
function frame_list() {
  var gs = frames.getElementsByTagName("g"), out = [];
  for (var i = 0; i < gs.length; i++) {
    var r = gs[i].getElementsByTagName("rect")[0];
    out.push({label: gs[i].getElementsByTagName("text")[0].getAttribute("data-label"),
              x: parseFloat(r.getAttribute("data-x")), w: parseFloat(r.getAttribute("data-w")),
              n: parseInt(gs[i].getAttribute("data-samples"), 10)});
  }
  return out;
}
function search(term) {
  var re;
  try { re = new RegExp(term); } catch (e) { matchedtxt.textContent = "Invalid: " + term; return; }
  var gs = frames.getElementsByTagName("g"), m = search_match(frame_list(), re), i;
  for (i = 0; i < gs.length; i++) gs[i].classList.remove("hl");
  for (i = 0; i < m.hits.length; i++) gs[m.hits[i]].classList.add("hl");
  searching = term;
  searchbtn.textContent = "Reset Search";
  matchedtxt.textContent = "Matched: " + m.pct.toFixed(1) + "%";
}
function reset_search() {
  var gs = frames.getElementsByTagName("g");
  for (var i = 0; i < gs.length; i++) gs[i].classList.remove("hl");
  searching = null;
  searchbtn.textContent = "Search";
  matchedtxt.textContent = " ";
}
// The button searches, or resets a search shown (like flamegraph.pl's);
// Ctrl-F always asks.
function search_prompt(always) {
  if (searching !== null && !always) { reset_search(); return; }
  var term = prompt("Search for (regular expression):", searching || "");
  if (term === null) return;
  if (term === "") reset_search(); else search(term);
}
)JS";

  std::string title_;
  std::ostream* out_ = nullptr;
  Node root_;
  size_t depth_ = 0;
};

}  // namespace

std::unique_ptr<Exporter> MakeFolded() { return std::make_unique<Folded>(); }
std::unique_ptr<Exporter> MakeFlameGraph(const std::string& title) {
  return std::make_unique<FlameGraph>(title);
}

}  // namespace flightrec::recorder::exporter
