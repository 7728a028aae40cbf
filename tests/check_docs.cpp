// Keeps README.md and the pages under docs/ true to the code and to each other.
//
// The markdown set of a repository ROOT is ROOT/README.md and every *.md under ROOT/docs/. The
// sources are every .cpp, .hpp, .h and .py file under ROOT/examples/ and ROOT/tests/ (except
// ROOT/tests/data/), plus any named on the command line. A marked block of a source is the lines
// between a line "// [readme-NAME-begin]" and a line "// [readme-NAME-end]" (in Python,
// "# // [readme-NAME-begin]" and "# // [readme-NAME-end]"), less their common indentation.
//
//   check_docs snippets ROOT [SOURCE...]
//     Every marked block of the sources appears verbatim (whole lines, less the common
//     indentation on both sides) in a fenced code block of some file of the markdown set, so the
//     documentation's code is the compiled code.
//   check_docs cpp-blocks ROOT [SOURCE...]
//     Every fenced block of the markdown set whose info string's first word is `cpp` or `c++` is
//     a marked block of a source (whole lines, less the common indentation), or is marked as a
//     fragment: the line just before its opening fence is "<!-- fragment -->".
//   check_docs links ROOT
//     Every relative target of a Markdown link or image ([text](target), ![alt](target)), of a
//     reference definition ([label]: target) and of an HTML href/src attribute in the markdown
//     set, outside code, names an existing file or directory, relative to the file that holds
//     it (a leading '/' means ROOT). A "#anchor" must be a heading (GitHub's slugs) or an
//     <a id>/<a name> of the target markdown file; a bare "#anchor" is one of the same file.
//     Nothing points outside ROOT: no link target and no "../" path in the text (relative to
//     the file; in fenced code, relative to ROOT) climbs above it. (Absolute paths are not
//     judged: /tmp/out in a command is an example, and a clone may live anywhere.)
//   check_docs all ROOT [SOURCE...]
//     The three above.
//   check_docs --cli-defaults DOC... path/to/sparsepush-train
//     Every default of sparsepush-train that the documentation states (the claims below) is the
//     program's: the defaults `--help` prints, and those it resolves when it runs (schedule, eta),
//     which a short run prints on its first line. Each DOC is a markdown file or a directory
//     (its *.md files, recursively); each claim is looked for in their texts in that order.
//
// Each problem is printed as "FILE:LINE: what is wrong" (FILE relative to ROOT); the exit status
// is 0 when there is none, 1 when there are problems, 2 on a usage or input error.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fs = std::filesystem;

namespace {
std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The lines less their common indentation (of the non-blank lines), each right-trimmed.
std::vector<std::string> dedent(std::vector<std::string> lines) {
  std::size_t indent = std::string::npos;
  for (const auto& l : lines)
    if (l.find_first_not_of(" \t") != std::string::npos) indent = std::min(indent, l.find_first_not_of(" \t"));
  for (auto& l : lines) l = rtrim(l.size() >= indent && indent != std::string::npos ? l.substr(indent) : std::string());
  return lines;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

/// `path` relative to `root`, with '/' separators, for messages.
std::string shown(const fs::path& path, const fs::path& root) {
  const fs::path rel = path.lexically_relative(root);
  return (rel.empty() ? path : rel).generic_string();
}

struct problems {
  int count = 0;
  void operator()(const std::string& where, int line, const std::string& what) {
    ++count;
    std::cerr << where << ":" << line << ": " << what << "\n";
  }
};

// --- sources and their marked blocks ----------------------------------------------------------

struct marked_block {
  std::string file;  // as shown
  int line = 0;      // of the begin marker
  std::string name;
  std::vector<std::string> lines;  // dedented
};

/// "NAME" of a marker line "// [readme-NAME-begin]" (or "# // [readme-NAME-begin]"), given the
/// suffix "-begin]" or "-end]"; empty when the line is no such marker.
std::string marker_name(const std::string& raw, std::string_view suffix) {
  std::string line = trim(raw);
  if (line.starts_with("#")) line = trim(std::string_view(line).substr(1));
  constexpr std::string_view head = "// [readme-";
  if (!line.starts_with(head) || !line.ends_with(suffix) || line.size() <= head.size() + suffix.size()) return {};
  std::string name = line.substr(head.size(), line.size() - head.size() - suffix.size());
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return {};
  return name;
}

std::vector<fs::path> find_sources(const fs::path& root) {
  std::vector<fs::path> found;
  for (const char* dir : {"examples", "tests"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (auto it = fs::recursive_directory_iterator(root / dir); it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && it->path() == root / "tests" / "data") {
        it.disable_recursion_pending();
        continue;
      }
      const std::string ext = it->path().extension().string();
      if (it->is_regular_file() && (ext == ".cpp" || ext == ".hpp" || ext == ".h" || ext == ".py"))
        found.push_back(it->path());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<marked_block> read_marked_blocks(const std::vector<fs::path>& sources, const fs::path& root,
                                             problems& problem) {
  std::vector<marked_block> blocks;
  for (const fs::path& source : sources) {
    const std::vector<std::string> lines = split_lines(read_file(source));
    marked_block current;
    bool open = false;
    std::vector<std::string> body;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const int n = static_cast<int>(i) + 1;
      if (const std::string begin = marker_name(lines[i], "-begin]"); !begin.empty()) {
        if (open) problem(shown(source, root), n, "[readme-" + begin + "-begin] inside the open block [readme-" + current.name + "]");
        current = {shown(source, root), n, begin, {}};
        body.clear();
        open = true;
      } else if (const std::string end = marker_name(lines[i], "-end]"); !end.empty()) {
        if (!open || end != current.name) {
          problem(shown(source, root), n, "[readme-" + end + "-end] closes no open [readme-" + end + "-begin]");
        } else {
          current.lines = dedent(body);
          blocks.push_back(current);
        }
        open = false;
      } else if (open) {
        body.push_back(lines[i]);
      }
    }
    if (open) problem(current.file, current.line, "[readme-" + current.name + "-begin] is never closed");
  }
  return blocks;
}

// --- the markdown set -------------------------------------------------------------------------

struct fenced_block {
  int line = 0;  // of the opening fence
  std::string info;
  bool fragment = false;
  std::vector<std::string> lines;  // dedented
};

struct markdown {
  fs::path path;
  std::string name;  // as shown
  std::vector<std::string> lines;
  std::vector<bool> in_fence;  // per line: a fence line or inside a fenced block
  std::vector<fenced_block> blocks;
  std::vector<int> unclosed;  // lines of fences never closed
};

markdown parse_markdown(const fs::path& path, const fs::path& root) {
  markdown md{path, shown(path, root), split_lines(read_file(path)), {}, {}, {}};
  md.in_fence.assign(md.lines.size(), false);
  static const std::regex open(R"(^([ \t]*)(`{3,}|~{3,})(.*)$)");
  for (std::size_t i = 0; i < md.lines.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(md.lines[i], m, open)) continue;
    const std::string fence = m[2].str();
    const std::string info = trim(m[3].str());
    if (fence[0] == '`' && info.find('`') != std::string::npos) continue;  // an inline code span
    fenced_block block{static_cast<int>(i) + 1, info, i > 0 && trim(md.lines[i - 1]) == "<!-- fragment -->", {}};
    md.in_fence[i] = true;
    std::size_t j = i + 1;
    std::vector<std::string> body;
    bool closed = false;
    for (; j < md.lines.size(); ++j) {
      md.in_fence[j] = true;
      const std::string t = trim(md.lines[j]);
      if (t.size() >= fence.size() && t.find_first_not_of(fence[0]) == std::string::npos) {
        closed = true;
        break;
      }
      body.push_back(md.lines[j]);
    }
    if (!closed) md.unclosed.push_back(block.line);
    block.lines = dedent(body);
    md.blocks.push_back(block);
    i = j;
  }
  return md;
}

/// Every *.md file under `dir`, recursively, sorted.
std::vector<fs::path> markdown_files_under(const fs::path& dir) {
  std::vector<fs::path> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".md") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<markdown> markdown_set(const fs::path& root) {
  std::vector<fs::path> paths;
  if (fs::is_regular_file(root / "README.md")) paths.push_back(root / "README.md");
  if (fs::is_directory(root / "docs")) {
    const std::vector<fs::path> docs = markdown_files_under(root / "docs");
    paths.insert(paths.end(), docs.begin(), docs.end());
  }
  if (paths.empty()) throw std::runtime_error("no README.md and no docs/*.md under " + root.string());
  std::vector<markdown> set;
  for (const auto& p : paths) set.push_back(parse_markdown(p, root));
  return set;
}

std::string first_word(const std::string& info) { return lower(info.substr(0, info.find_first_of(" \t{,"))); }

/// Whether `needle` is a run of whole lines of `hay` (the run less its own common indentation).
bool contains_lines(const std::vector<std::string>& hay, const std::vector<std::string>& needle) {
  if (needle.empty() || needle.size() > hay.size()) return needle.empty();
  for (std::size_t at = 0; at + needle.size() <= hay.size(); ++at)
    if (dedent({hay.begin() + static_cast<std::ptrdiff_t>(at), hay.begin() + static_cast<std::ptrdiff_t>(at + needle.size())}) == needle)
      return true;
  return false;
}

int check_snippets(const std::vector<markdown>& set, const std::vector<marked_block>& blocks, problems& problem) {
  int missing = 0;
  for (const auto& b : blocks) {
    bool found = false;
    for (const auto& md : set)
      for (const auto& f : md.blocks)
        if (!found && contains_lines(f.lines, b.lines)) found = true;
    if (!found) {
      ++missing;
      problem(b.file, b.line,
              "block [readme-" + b.name + "] appears in no fenced block of README.md or docs/:\n" + joined(b.lines));
    }
  }
  std::cout << blocks.size() << " marked blocks, " << missing << " missing from README.md and docs/\n";
  if (blocks.empty()) {
    ++problem.count;
    std::cerr << "no marked blocks ([readme-NAME-begin]) in the sources: is the root right?\n";
  }
  return missing;
}

int check_cpp_blocks(const std::vector<markdown>& set, const std::vector<marked_block>& blocks, problems& problem) {
  int total = 0, fragments = 0, bad = 0;
  for (const auto& md : set) {
    for (int line : md.unclosed) problem(md.name, line, "code fence is never closed");
    for (const auto& f : md.blocks) {
      const std::string lang = first_word(f.info);
      if (lang != "cpp" && lang != "c++") continue;
      ++total;
      if (f.fragment) {
        ++fragments;
        continue;
      }
      const bool marked = std::any_of(blocks.begin(), blocks.end(), [&](const marked_block& b) { return b.lines == f.lines; });
      if (marked) continue;
      ++bad;
      std::string first;
      for (const auto& l : f.lines)
        if (first.empty() && !trim(l).empty()) first = trim(l);
      problem(md.name, f.line,
              "```" + lang + " block starting \"" + first +
                  "\" is no marked block ([readme-NAME-begin]...[readme-NAME-end]) of a compiled source and is "
                  "not marked as a fragment (a line \"<!-- fragment -->\" just before the fence)");
    }
  }
  std::cout << total << " C++ blocks in README.md and docs/: " << total - fragments - bad << " compiled, " << fragments
            << (fragments == 1 ? " fragment, " : " fragments, ") << bad << " neither\n";
  return bad;
}

// --- links and anchors ------------------------------------------------------------------------

/// Appends the UTF-8 encoding of `cp`.
void put_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// GitHub's anchor of a heading's rendered text: lower case; letters, digits, spaces, '-' and '_'
/// kept, anything else dropped; each space a '-'. (Beyond ASCII: Latin-1 and Greek letters are
/// kept and lowered, punctuation and symbols dropped, other scripts kept.)
std::string slug(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::uint32_t cp = c;
    std::size_t n = 1;
    if (c >= 0xF0 && i + 3 < text.size()) cp = ((c & 0x07u) << 18) | ((text[i + 1] & 0x3Fu) << 12) | ((text[i + 2] & 0x3Fu) << 6) | (text[i + 3] & 0x3Fu), n = 4;
    else if (c >= 0xE0 && i + 2 < text.size()) cp = ((c & 0x0Fu) << 12) | ((text[i + 1] & 0x3Fu) << 6) | (text[i + 2] & 0x3Fu), n = 3;
    else if (c >= 0xC0 && i + 1 < text.size()) cp = ((c & 0x1Fu) << 6) | (text[i + 1] & 0x3Fu), n = 2;
    i += n;
    if (cp < 0x80) {
      if (std::isalnum(static_cast<int>(cp)) || cp == '-' || cp == '_') out += static_cast<char>(std::tolower(static_cast<int>(cp)));
      else if (cp == ' ') out += '-';
    } else if ((cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) || (cp >= 0x391 && cp <= 0x3A9)) {
      put_utf8(out, cp + 0x20);
    } else if (cp < 0xC0 || cp == 0xD7 || cp == 0xF7 || (cp >= 0x2000 && cp <= 0x2BFF) || (cp >= 0x3000 && cp <= 0x303F) ||
               (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF0F) || cp >= 0x1F000) {
      // punctuation, symbols, emoji: dropped
    } else {
      put_utf8(out, cp);
    }
  }
  return out;
}

/// A heading's text as GitHub renders it (before the slug): code spans' contents kept as they
/// are; elsewhere links and images as their text, HTML tags, entities, escapes and emphasis
/// underscores removed.
std::string heading_text(const std::string& raw) {
  static const std::regex image(R"(!\[([^\]]*)\]\([^)]*\))"), link(R"(\[([^\]]*)\](\([^)]*\)|\[[^\]]*\]))"),
      tag(R"(</?[A-Za-z][^>]*>)"), entity(R"(&#?[A-Za-z0-9]+;)"), escape(R"(\\([!-/:-@\[-`{-~]))"),
      emphasis(R"((^|[^A-Za-z0-9])_+|_+($|[^A-Za-z0-9]))");
  std::string out;
  std::size_t i = 0;
  while (i < raw.size()) {
    const std::size_t tick = raw.find('`', i);
    std::string prose = raw.substr(i, tick == std::string::npos ? std::string::npos : tick - i);
    prose = std::regex_replace(prose, image, "$1");
    prose = std::regex_replace(prose, link, "$1");
    prose = std::regex_replace(prose, tag, "");
    prose = std::regex_replace(prose, entity, "");
    prose = std::regex_replace(prose, emphasis, "$1$2");
    prose = std::regex_replace(prose, escape, "$1");
    out += prose;
    if (tick == std::string::npos) break;
    std::size_t run = raw.find_first_not_of('`', tick);
    if (run == std::string::npos) break;
    const std::string ticks = raw.substr(tick, run - tick);
    const std::size_t close = raw.find(ticks, run);
    if (close == std::string::npos) {
      out += ticks;
      i = run;
      continue;
    }
    out += raw.substr(run, close - run);
    i = close + ticks.size();
  }
  return trim(out);
}

/// Every anchor of a markdown file: its headings' slugs (a repeated slug gets -1, -2, ...) and
/// its <a id="..."> and <a name="..."> anchors.
std::set<std::string> anchors(const markdown& md) {
  static const std::regex atx(R"(^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$)"), setext(R"(^ {0,3}(=+|-+)[ \t]*$)"),
      named(R"(<a\s[^>]*\b(?:id|name)\s*=\s*["']([^"']+)["'])", std::regex::icase);
  std::set<std::string> found;
  std::map<std::string, int> seen;
  auto add_heading = [&](const std::string& text) {
    const std::string base = slug(heading_text(text));
    std::string s = base;
    if (seen.contains(base)) {
      do s = base + "-" + std::to_string(++seen[base]);
      while (seen.contains(s));
    }
    seen[s] = 0;
    found.insert(s);
  };
  for (std::size_t i = 0; i < md.lines.size(); ++i) {
    if (md.in_fence[i]) continue;
    const std::string& line = md.lines[i];
    std::smatch m;
    if (std::regex_match(line, m, atx)) {
      add_heading(m[1].str());
    } else if (i > 0 && !md.in_fence[i - 1] && std::regex_match(line, m, setext) && !trim(md.lines[i - 1]).empty() &&
               !std::regex_match(md.lines[i - 1], atx) && !std::regex_match(md.lines[i - 1], setext) &&
               !trim(md.lines[i - 1]).starts_with("- ") && !trim(md.lines[i - 1]).starts_with("* ") &&
               !trim(md.lines[i - 1]).starts_with("|")) {
      add_heading(trim(md.lines[i - 1]));
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), named); it != std::sregex_iterator(); ++it)
      found.insert((*it)[1].str());
  }
  return found;
}

std::string percent_decoded(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// The text outside fenced blocks, inline code spans and HTML comments (each of those blanked,
/// newlines kept, so offsets keep their lines).
std::string prose_of(const markdown& md) {
  std::string text;
  for (std::size_t i = 0; i < md.lines.size(); ++i) text += (md.in_fence[i] ? std::string() : md.lines[i]) + "\n";
  auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to; ++k)
      if (text[k] != '\n') text[k] = ' ';
  };
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, 4, "<!--") == 0) {
      const std::size_t end = text.find("-->", i + 4);
      const std::size_t to = end == std::string::npos ? text.size() : end + 3;
      blank(i, to);
      i = to;
    } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '`') {
      i += 2;
    } else if (text[i] == '`') {
      const std::size_t run = text.find_first_not_of('`', i);
      if (run == std::string::npos) break;
      const std::string ticks = text.substr(i, run - i);
      // The span closes at the next run of exactly as many backticks, within its paragraph.
      std::size_t close = run;
      while ((close = text.find(ticks, close)) != std::string::npos &&
             close + ticks.size() < text.size() && text[close + ticks.size()] == '`')
        close = text.find_first_not_of('`', close);
      const std::size_t paragraph_end = text.find("\n\n", i);
      if (close == std::string::npos || (paragraph_end != std::string::npos && close > paragraph_end)) {
        i = run;
        continue;
      }
      blank(i, close + ticks.size());
      i = close + ticks.size();
    } else {
      ++i;
    }
  }
  return text;
}

int line_of(const std::string& text, std::size_t offset) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

struct link {
  int line = 0;
  std::string target;
};

/// The targets of the links of a markdown file outside code: inline links and images, reference
/// definitions, HTML href and src attributes.
std::vector<link> links_of(const markdown& md) {
  const std::string text = prose_of(md);
  std::vector<link> found;
  for (std::size_t at = text.find("]("); at != std::string::npos; at = text.find("](", at + 2)) {
    if (at > 0 && text[at - 1] == '\\') continue;
    std::size_t i = at + 2;
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n')) ++i;
    std::string target;
    if (i < text.size() && text[i] == '<') {
      const std::size_t end = text.find('>', i);
      if (end == std::string::npos) continue;
      target = text.substr(i + 1, end - i - 1);
    } else {
      int depth = 0;
      for (; i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])); ++i) {
        if (text[i] == '(') ++depth;
        if (text[i] == ')' && depth-- == 0) break;
        if (text[i] == '\\' && i + 1 < text.size()) target += text[++i];
        else target += text[i];
      }
    }
    found.push_back({line_of(text, at), target});
  }
  static const std::regex definition(R"((^|\n) {0,3}\[([^\]\n]+)\]:[ \t]*(<[^>\n]*>|\S+))"),
      attribute(R"(<[A-Za-z][^>]*\s(?:href|src)\s*=\s*["']([^"']*)["'])", std::regex::icase);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), definition); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    if (m[2].str().starts_with("^")) continue;  // a footnote
    std::string target = m[3].str();
    if (target.starts_with("<")) target = target.substr(1, target.size() - 2);
    found.push_back({line_of(text, static_cast<std::size_t>(m.position(3))), target});
  }
  for (auto it = std::sregex_iterator(text.begin(), text.end(), attribute); it != std::sregex_iterator(); ++it)
    found.push_back({line_of(text, static_cast<std::size_t>(it->position(1))), (*it)[1].str()});
  std::sort(found.begin(), found.end(), [](const link& a, const link& b) { return a.line < b.line; });
  return found;
}

/// Whether a lexically normal path relative to the root climbs above it.
bool climbs_out(const fs::path& relative) {
  return !relative.empty() && *relative.begin() == "..";
}

int check_links(const std::vector<markdown>& set, const fs::path& root, problems& problem) {
  std::map<fs::path, std::set<std::string>> anchor_cache;
  for (const auto& md : set) anchor_cache[fs::weakly_canonical(md.path)] = anchors(md);
  auto anchors_of = [&](const fs::path& file) -> const std::set<std::string>& {
    const fs::path key = fs::weakly_canonical(file);
    if (!anchor_cache.contains(key)) anchor_cache[key] = anchors(parse_markdown(file, root));
    return anchor_cache[key];
  };
  static const std::regex scheme(R"(^[A-Za-z][A-Za-z0-9+.-]*:)");
  int total = 0;
  const int before = problem.count;
  for (const auto& md : set) {
    const fs::path dir = md.path.parent_path().lexically_relative(root);  // the file's directory, from the root
    std::set<std::pair<int, std::string>> reported;  // links outside the root, not to report twice
    for (const link& l : links_of(md)) {
      ++total;
      const std::string& target = l.target;
      if (target.empty()) {
        problem(md.name, l.line, "link with an empty target");
        continue;
      }
      if (std::regex_search(target, scheme) || target.starts_with("//")) continue;  // http:, https:, mailto:, ...
      const std::size_t hash = target.find('#');
      std::string path = percent_decoded(target.substr(0, hash));
      const std::string anchor = hash == std::string::npos ? std::string() : percent_decoded(target.substr(hash + 1));
      if (const std::size_t q = path.find('?'); q != std::string::npos) path.resize(q);
      fs::path file = md.path;
      if (!path.empty()) {
        const std::size_t slashes = std::min(path.find_first_not_of('/'), path.size());
        const fs::path relative = (slashes > 0 ? fs::path(path.substr(slashes)) : dir / path).lexically_normal();
        if (climbs_out(relative)) {
          problem(md.name, l.line, "link target " + target + " points outside the repository");
          reported.emplace(l.line, target);
          continue;
        }
        file = root / relative;
        if (!fs::exists(file)) {
          problem(md.name, l.line, "link target " + target + ": no such file or directory (" + relative.generic_string() + ")");
          continue;
        }
      }
      if (!anchor.empty() && file.extension() == ".md" && fs::is_regular_file(file) && !anchors_of(file).contains(anchor))
        problem(md.name, l.line,
                "link target " + target + ": no heading or <a id> with the anchor #" + anchor + " in " + shown(file, root));
    }
    // Text that names a path outside the repository.
    static const std::regex dotdot(R"((^|[\s`'"(\[<=:,])((?:\.\./)+)([^\s`'")\]>,;]*))");
    for (std::size_t i = 0; i < md.lines.size(); ++i) {
      const std::string& line = md.lines[i];
      for (auto it = std::sregex_iterator(line.begin(), line.end(), dotdot); it != std::sregex_iterator(); ++it) {
        const fs::path from = md.in_fence[i] ? fs::path() : dir;  // commands run from the root
        const std::string path = (*it)[2].str() + (*it)[3].str();
        if (!reported.contains({static_cast<int>(i) + 1, path}) && climbs_out((from / path).lexically_normal()))
          problem(md.name, static_cast<int>(i) + 1,
                  "\"" + path + "\" points outside the repository" +
                      (md.in_fence[i] ? " (from its root)" : ""));
      }
    }
  }
  const int bad = problem.count - before;
  std::cout << total << " links in README.md and docs/, " << bad << (bad == 1 ? " problem\n" : " problems\n");
  return bad;
}

// --- the documentation's defaults of sparsepush-train against the program's --------------------

/// One default the documentation states: where it says it (group 1 of `docs`, matched ignoring
/// case against the documentation with its whitespace collapsed, so line wrapping does not
/// matter) and where the program says it (group 1 of `program`, matched against `--help`
/// followed by a short run's output).
struct claim {
  const char* option;
  const char* docs;
  const char* program;
};

// Each sentence below is checked against every source that states the same default.
// `--help` lines read "  --name TYPE[:CHECK]=DEFAULT"; the run's first line reads
// "sparsepush-train: ALG on N nodes, schedule S, compressor C, eta E, model M (...), skew K, ...".
const claim claims[] = {
    {"--nodes", R"(with its defaults: - (\d+) nodes train)", R"(\n *--nodes [^=\n]*=(\S+))"},
    {"--model", R"(nodes train the reference (\w+) on)", R"(\n *--model [^=\n]*=(\S+))"},
    {"--algorithm", R"(on fashion-mnist with (\w+) \()", R"(\n *--algorithm [^=\n]*=(\S+))"},
    {"--algorithm", R"(on fashion-mnist with (\w+) \()", R"(sparsepush-train: (\w+) on \d+ nodes, )"},
    {"--compressor", R"(with \w+ \((top-[\d.]+%), eta)", R"(\n *--compressor [^=\n]*=(\S+))"},
    {"--compressor", R"(with \w+ \((top-[\d.]+%), eta)", R"(, compressor ([^, ]+), eta )"},
    {"--eta", R"(\(top-[\d.]+%, eta ([\d.]+),)", R"(, compressor [^, ]+, eta ([^, ]+), )"},
    {"--final-rounds", R"(eta [\d.]+, (\w+) final gossip rounds)",
     R"(\n *--final-rounds [^=\n]*=(\S+))"},
    {"--schedule", R"(they communicate over the [^(;]*\(`([^`]+)`\);)", R"(\(default: ([^;)]+)[;)])"},
    {"--schedule", R"(they communicate over the [^(;]*\(`([^`]+)`\);)", R"(nodes, schedule ([^, ]+), )"},
    {"--skew", R"(label-skewed shard \(skew ([\d.]+)\))", R"(\n *--skew [^=\n]*=(\S+))"},
    {"--skew", R"(label-skewed shard \(skew ([\d.]+)\))", R"(\), skew ([^, ]+), )"},
    {"--epochs", R"(training runs for ([\d.]+) epochs)", R"(\n *--epochs [^=\n]*=(\S+))"},
    // The default eta by compressor, one claim a compressor: the documentation may write "at
    // top-1%" or "at f >= 1%", and list more compressors than --help does.
    {"--eta (top-1%)", R"(the default follows the compressor: [^|]*?([\d.]+) at (?:top-|f >= )1%)",
     R"(default from the compressor: [^)]*?([\d.]+) at top-1%)"},
    {"--eta (top-10%)", R"(the default follows the compressor: [^|]*?([\d.]+) at (?:top-|f >= )10%)",
     R"(default from the compressor: [^)]*?([\d.]+) at top-10%)"},
    {"--eta (identity)", R"(the default follows the compressor: [^|]*?([\d.]+) for identity)",
     R"(default from the compressor: [^)]*?([\d.]+) for identity)"},
    {"--per-layer", R"(top-k is (\w+) by default\. `--per-layer`)", R"(\n *--per-layer .* instead of (\w+))"},
    {"--data", R"(by default it uses debian's `dataset-fashion-mnist` under `([^`]+)`)",
     R"(\n *--data [^=\n]*=(\S+))"},
    {"--transport", R"(`--transport` is `(\w+)` by default)", R"(\n *--transport [^=\n]*=(\S+))"},
    {"--mpi-timeout", R"(waits `--mpi-timeout` seconds \(default (\d+)\))", R"(\n *--mpi-timeout [^=\n]*=(\S+))"},
    {"--loss-recovery", R"(picks the variant \(default `(\w+)`;)", R"(\n *--loss-recovery [^=\n]*=(\S+))"},
    {"--drop-probability", R"(`--drop-probability` defaults to (\d+)\))", R"(\n *--drop-probability [^=\n]*=(\S+))"},
    {"--staleness", R"(`--staleness (\d+)`, lockstep, is the default)", R"(\n *--staleness [^=\n]*=(\S+))"},
    // "`--jitter F` (default 1: none)" in prose, "| `--jitter F` | `1` |" in a table of options
    {"--jitter", R"(`--jitter F`(?: \(default | \| `)(\d+)[:`])", R"(\n *--jitter [^=\n]*=(\S+))"},
    {"--checkpoint-every", R"(every `--checkpoint-every` rounds \((\d+), the\s+default)", R"(\n *--checkpoint-every [^=\n]*=(\S+))"},
};

/// Writes a value the way both sides can agree on: lower case, "top-1%" as "top-k:0.01", numbers
/// in %g ("5" and "5.0" agree), "a, b and c" as "a, b, c", whitespace collapsed.
std::string canonical(std::string s) {
  s = lower(s);
  std::smatch m;
  static const std::regex percent(R"(top-(\d+(?:\.\d+)?)%)");
  while (std::regex_search(s, m, percent)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "top-k:%g", std::stod(m[1].str()) / 100);
    s = m.prefix().str() + buf + m.suffix().str();
  }
  std::string out;
  static const std::regex number(R"(\d+(?:\.\d+)?(?:e[-+]?\d+)?)");
  std::string rest = s;
  while (std::regex_search(rest, m, number)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", std::stod(m[0].str()));
    out += m.prefix().str() + buf;
    rest = m.suffix().str();
  }
  out += rest;
  out = std::regex_replace(out, std::regex(R"(,? and )"), ", ");
  return std::regex_replace(out, std::regex(R"(\s+)"), " ");
}

/// stdout and stderr of a shell command, and whether it exited with 0.
std::string run(const std::string& command, bool& ok) {
  std::FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + command);
  std::string out;
  char buf[4096];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ok = pclose(p) == 0;
  return out;
}

int check_cli_defaults(const std::vector<std::string>& doc_args, const std::string& program) {
  // The documents in the order given (a directory: its *.md files, sorted), each once.
  std::vector<fs::path> docs;
  for (const auto& arg : doc_args) {
    std::vector<fs::path> found;
    if (fs::is_directory(arg)) {
      found = markdown_files_under(arg);
    } else if (fs::is_regular_file(arg)) {
      found.push_back(arg);
    } else {
      throw std::runtime_error("cannot read " + arg);
    }
    for (const auto& f : found)
      if (std::none_of(docs.begin(), docs.end(), [&](const fs::path& d) { return fs::equivalent(d, f); }))
        docs.push_back(f);
  }
  // Their texts concatenated, whitespace collapsed; where[i] is the file and line of text[i].
  std::string text;
  std::vector<std::pair<std::size_t, int>> where;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    const std::string raw = read_file(docs[d]) + "\n\n";
    int line = 1;
    for (const char c : raw) {
      if (std::isspace(static_cast<unsigned char>(c))) {
        if (text.empty() || text.back() != ' ') text += ' ', where.emplace_back(d, line);
      } else {
        text += c, where.emplace_back(d, line);
      }
      if (c == '\n') ++line;
    }
  }
  std::string names;
  for (std::size_t d = 0; d < docs.size() && d < 3; ++d) names += (d == 0 ? "" : ", ") + docs[d].generic_string();
  if (docs.size() > 3) names += " and " + std::to_string(docs.size() - 3) + " more";
  bool help_ok = false, run_ok = false;
  const std::string quoted = "'" + program + "'";
  const std::string help = run(quoted + " --help", help_ok);
  // Everything the documentation states stays at its default except what makes the run short.
  const std::string short_run =
      run(quoted + " --nodes 4 --model mlp --epochs 0.01 --final-rounds 1 --eval-samples 100", run_ok);
  if (!help_ok || !run_ok) {
    std::cerr << program << " failed:\n" << help << "\n" << short_run << "\n";
    return 1;
  }
  const std::string said = help + "\n" + short_run;
  int wrong = 0;
  for (const claim& c : claims) {
    std::smatch r, p;
    if (!std::regex_search(text, r, std::regex(c.docs, std::regex::ECMAScript | std::regex::icase))) {
      std::cerr << "no file of " << names << " states the default of " << c.option << " as /" << c.docs
                << "/: update the claim in tests/check_docs.cpp\n";
      ++wrong;
      continue;
    }
    const auto [file, line] = where[static_cast<std::size_t>(r.position(1))];
    const std::string at = docs[file].generic_string() + ":" + std::to_string(line) + ": ";
    if (!std::regex_search(said, p, std::regex(c.program))) {
      std::cerr << at << "sparsepush-train no longer prints the default of " << c.option << " as /" << c.program
                << "/: update the claim in tests/check_docs.cpp\n";
      ++wrong;
    } else if (canonical(r[1].str()) != canonical(p[1].str())) {
      std::cerr << at << "says the default of " << c.option << " is \"" << r[1].str() << "\", sparsepush-train says \""
                << p[1].str() << "\"\n";
      ++wrong;
    } else {
      std::cout << c.option << ": " << p[1].str() << (p.position(0) < std::ssize(help) ? " (--help, " : " (run, ")
                << at.substr(0, at.size() - 2) << ")\n";
    }
  }
  std::cout << std::size(claims) << " checks of the defaults the documentation states, " << wrong << " wrong\n";
  return wrong == 0 ? 0 : 1;
}

int usage() {
  std::cerr << "usage: check_docs snippets|cpp-blocks|all ROOT [SOURCE...]\n"
               "       check_docs links ROOT\n"
               "       check_docs --cli-defaults DOC... path/to/sparsepush-train\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() >= 3 && args[0] == "--cli-defaults")
      return check_cli_defaults({args.begin() + 1, args.end() - 1}, args.back());
    if (args.size() < 2) return usage();
    const std::string& mode = args[0];
    if (mode != "snippets" && mode != "cpp-blocks" && mode != "links" && mode != "all") return usage();
    if (mode == "links" && args.size() > 2) return usage();
    if (!fs::is_directory(args[1])) throw std::runtime_error(args[1] + " is no directory");
    fs::path root = fs::weakly_canonical(fs::absolute(args[1]));
    if (!root.has_filename()) root = root.parent_path();
    const std::vector<markdown> set = markdown_set(root);
    problems problem;
    if (mode != "links") {
      std::vector<fs::path> sources = find_sources(root);
      for (std::size_t a = 2; a < args.size(); ++a)
        if (const fs::path source = fs::weakly_canonical(fs::absolute(args[a]));
            std::find(sources.begin(), sources.end(), source) == sources.end())
          sources.push_back(source);
      const std::vector<marked_block> blocks = read_marked_blocks(sources, root, problem);
      if (mode != "cpp-blocks") check_snippets(set, blocks, problem);
      if (mode != "snippets") check_cpp_blocks(set, blocks, problem);
    }
    if (mode == "links" || mode == "all") check_links(set, root, problem);
    if (problem.count > 0) {
      std::cerr << "check_docs " << mode << ": " << problem.count << (problem.count == 1 ? " problem" : " problems")
                << " in " << root.generic_string() << "\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "check_docs: " << e.what() << "\n";
    return 2;
  }
}
