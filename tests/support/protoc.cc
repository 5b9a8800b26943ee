#include "tests/support/protoc.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace flightrec::testing {

// The files are arguments of the shell, never part of its script.
RunResult ProtocDecodeRaw(const std::string& file) {
  return RunCommand({"/bin/sh", "-c", "exec /usr/bin/protoc --decode_raw < \"$1\"", "sh", file});
}

RunResult ProtocDecode(const std::string& dir, const std::string& proto_name,
                       const std::string& schema, const std::string& file,
                       const std::string& message) {
  std::ofstream(dir + "/" + proto_name) << schema;
  return ProtocDecodeWith(dir, proto_name, message, file);
}

RunResult ProtocDecodeWith(const std::string& proto_path, const std::string& proto_file,
                           const std::string& message, const std::string& file) {
  return RunCommand({"/bin/sh", "-c",
                     "exec /usr/bin/protoc --proto_path=\"$1\" --decode=\"$2\" \"$3\" < \"$4\"",
                     "sh", proto_path, message, proto_file, file});
}

std::vector<const Node*> Node::All(uint32_t n) const {
  std::vector<const Node*> out;
  for (const auto& f : fields) {
    if (f.number == n) out.push_back(&f);
  }
  return out;
}

const Node* Node::One(uint32_t n) const {
  auto all = All(n);
  return all.size() == 1 ? all[0] : nullptr;
}

std::vector<const Node*> Node::Named(const std::string& k) const {
  std::vector<const Node*> out;
  for (const auto& f : fields) {
    if (f.key == k) out.push_back(&f);
  }
  return out;
}

const Node* Node::Name(const std::string& k) const {
  auto all = Named(k);
  return all.size() == 1 ? all[0] : nullptr;
}

namespace {

// protoc prints bytes with C escapes (octal for the unprintable).
std::string Unescape(const std::string& q) {
  std::string out;
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    if (q[i] != '\\') {
      out += q[i];
      continue;
    }
    char c = q[++i];
    if (c >= '0' && c <= '7') {
      int v = 0;
      for (int k = 0; k < 3 && i < q.size() - 1 && q[i] >= '0' && q[i] <= '7'; ++k, ++i) {
        v = v * 8 + (q[i] - '0');
      }
      --i;
      out += static_cast<char>(v);
    } else if (c == 'x') {
      out += static_cast<char>(std::stoi(q.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
  }
  return out;
}

}  // namespace

Node ParseText(const std::string& text) {
  Node root;
  root.message = true;
  std::vector<Node*> stack = {&root};
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    line = line.substr(b);
    if (line == "}") {
      stack.pop_back();
      if (stack.empty()) throw std::runtime_error("unbalanced }");
      continue;
    }
    Node n;
    n.key = line.substr(0, line.find_first_of(": {"));
    if (std::isdigit(static_cast<unsigned char>(n.key[0]))) {
      n.number = static_cast<uint32_t>(std::stoul(n.key));
    }
    if (line.back() == '{') {
      n.message = true;
      stack.back()->fields.push_back(std::move(n));
      stack.push_back(&stack.back()->fields.back());
      continue;
    }
    std::string v = line.substr(line.find(": ") + 2);
    n.text = v.front() == '"' ? Unescape(v) : v;
    stack.back()->fields.push_back(std::move(n));
  }
  return root;
}

}  // namespace flightrec::testing
