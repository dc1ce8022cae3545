// A small interpreter for the sh subset of /.singularity.d/env scripts (ctr/env_script_interpreter.hpp).
#include "ctr/env_script_interpreter.hpp"

#include <optional>
#include <vector>

#include "ctr/environment.hpp"

namespace ctr::launch {

namespace {

// Thrown to decline: the reason ends up in the caller's debug log.
struct Decline {
  std::string reason;
};

[[noreturn]] void decline(std::string reason) { throw Decline{std::move(reason)}; }

constexpr int kMaxSourceDepth = 16;

bool isNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || (c >= '0' && c <= '9'); }
bool isBlank(char c) { return c == ' ' || c == '\t'; }
// Characters that end an unquoted word or start an operator.
bool isMeta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' ||
         c == '>' || c == '(' || c == ')';
}

// A word after expansion: its text and whether any part came from an unquoted expansion
// (field splitting and globbing would apply to it as a command argument).
struct Word {
  std::string raw;       // source text, for keywords and names
  std::string value;     // expanded
  bool unquotedExpansion = false;
  bool quoted = false;   // any quoting at all (a quoted keyword is not a keyword)
};

class Interpreter {
 public:
  Interpreter(std::string_view text, ShellVars& vars, const ShellHost* host, int depth)
      : s_(text), vars_(vars), host_(host), depth_(depth) {}

  void run() {
    runList({});
    if (pos_ < s_.size()) decline("unexpected '" + std::string(peekWordRaw()) + "'");
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  ShellVars& vars_;
  const ShellHost* host_;
  int depth_;  // nesting of `. FILE`
  bool executing_ = true;  // false inside a branch not taken: parse only

  // lexing
  void skipBlanksAndContinuations() {
    for (;;) {
      while (pos_ < s_.size() && isBlank(s_[pos_])) ++pos_;
      if (pos_ + 1 < s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == '\n') {
        pos_ += 2;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      }
      return;
    }
  }

  // Skips separators (newlines, ';'); returns whether any was seen.
  bool skipSeparators() {
    bool seen = false;
    for (;;) {
      skipBlanksAndContinuations();
      if (pos_ < s_.size() && (s_[pos_] == '\n' || s_[pos_] == ';')) {
        if (s_[pos_] == ';' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ';') decline("';;'");
        ++pos_;
        seen = true;
        continue;
      }
      return seen;
    }
  }

  std::string_view peekWordRaw() {
    size_t save = pos_;
    skipBlanksAndContinuations();
    size_t start = pos_;
    while (pos_ < s_.size() && !isMeta(s_[pos_])) ++pos_;
    std::string_view w = s_.substr(start, pos_ - start);
    pos_ = save;
    return w;
  }

  bool atEnd() {
    skipBlanksAndContinuations();
    return pos_ >= s_.size();
  }

  std::string lookup(const std::string& name, bool* isSet) {
    auto it = vars_.vars.find(name);
    *isSet = it != vars_.vars.end() && it->second.set;
    return *isSet ? it->second.value : std::string();
  }

  // A new shell variable is not exported; an existing one keeps its export flag.
  ShellVars::Var& var(const std::string& name) {
    auto [it, added] = vars_.vars.try_emplace(name);
    if (added) {
      it->second.set = false;
      it->second.exported = false;
    }
    return it->second;
  }

  void assign(const std::string& name, std::string value) {
    if (!executing_) return;
    auto& v = var(name);
    v.value = std::move(value);
    v.set = true;
  }

  // $... at pos_ (pos_ on the '$'); appends the expansion to `out`.
  void expandDollar(std::string& out, bool inDoubleQuotes, Word& word) {
    ++pos_;
    if (pos_ >= s_.size()) {
      out += '$';
      return;
    }
    char c = s_[pos_];
    if (isNameStart(c)) {
      size_t start = pos_;
      while (pos_ < s_.size() && isNameChar(s_[pos_])) ++pos_;
      bool set = false;
      out += lookup(std::string(s_.substr(start, pos_ - start)), &set);
      if (!inDoubleQuotes) word.unquotedExpansion = true;
      return;
    }
    if (c == '{') {
      expandBraced(out, inDoubleQuotes, word);
      return;
    }
    if (c == '(') decline("command substitution or arithmetic");
    decline(std::string("special parameter $") + c);
  }

  // ${NAME}, ${NAME-word}, ${NAME:+word}, ${NAME=word} ... (pos_ on the '{').
  void expandBraced(std::string& out, bool inDoubleQuotes, Word& word) {
    ++pos_;
    size_t start = pos_;
    while (pos_ < s_.size() && isNameChar(s_[pos_])) ++pos_;
    std::string name(s_.substr(start, pos_ - start));
    if (name.empty() || !isNameStart(name[0])) decline("${...} of a special or positional parameter");
    if (!inDoubleQuotes) word.unquotedExpansion = true;
    bool set = false;
    std::string value = lookup(name, &set);
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out += value;
      return;
    }
    bool colon = false;
    if (pos_ < s_.size() && s_[pos_] == ':') {
      colon = true;
      ++pos_;
    }
    if (pos_ >= s_.size()) decline("unterminated ${");
    char op = s_[pos_++];
    if (op != '-' && op != '+' && op != '=') decline(std::string("${NAME") + (colon ? ":" : "") + op + "...}");
    std::string operand = readOperand(inDoubleQuotes, word);
    const bool useOperand = colon ? (set && !value.empty()) == (op == '+') : set == (op == '+');
    if (op == '=' && useOperand) {
      assign(name, operand);
      out += operand;
    } else if (useOperand) {
      out += operand;
    } else if (op != '+') {
      out += value;
    }
  }

  // The operand of ${NAME-word}: a word up to the matching '}' (quotes and nested expansions allowed).
  std::string readOperand(bool inDoubleQuotes, Word& word) {
    std::string operand;
    for (;;) {
      if (pos_ >= s_.size()) decline("unterminated ${");
      char d = s_[pos_];
      if (d == '}') {
        ++pos_;
        return operand;
      }
      if (d == '$') {
        expandDollar(operand, inDoubleQuotes, word);
      } else if (d == '"') {
        // Quotes in the operand are removed, also inside "${X:-"word"}" (as the shells do:
        // the Docker images' 10-docker2singularity.sh writes that form).
        readDoubleQuoted(operand, word);
      } else if (d == '\'' && !inDoubleQuotes) {
        readSingleQuoted(operand);  // inside "...", a ' is itself
      } else if (d == '\\') {
        if (pos_ + 1 >= s_.size()) decline("trailing backslash");
        // Inside "...", a backslash escapes only $ ` " \ and the closing brace.
        const char n = s_[pos_ + 1];
        if (inDoubleQuotes && std::string_view("$`\"\\}").find(n) == std::string_view::npos) operand += '\\';
        operand += n;
        pos_ += 2;
      } else if (d == '`') {
        decline("command substitution");
      } else {
        operand += d;
        ++pos_;
      }
    }
  }

  void readSingleQuoted(std::string& out) {
    size_t end = s_.find('\'', pos_ + 1);
    if (end == std::string_view::npos) decline("unterminated '");
    out.append(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
  }

  void readDoubleQuoted(std::string& out, Word& word) {
    ++pos_;
    for (;;) {
      if (pos_ >= s_.size()) decline("unterminated \"");
      char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c == '$') {
        expandDollar(out, true, word);
      } else if (c == '`') {
        decline("command substitution");
      } else if (c == '\\' && pos_ + 1 < s_.size()) {
        char n = s_[pos_ + 1];
        if (n == '\n') {
          pos_ += 2;
        } else if (n == '$' || n == '`' || n == '"' || n == '\\') {
          out += n;
          pos_ += 2;
        } else {
          out += '\\';
          ++pos_;
        }
      } else {
        out += c;
        ++pos_;
      }
    }
  }

  // Reads one word (pos_ at its first character), expanding as it goes.
  Word readWord() {
    Word w;
    size_t start = pos_;
    while (pos_ < s_.size() && !isMeta(s_[pos_])) {
      char c = s_[pos_];
      if (c == '\'') {
        w.quoted = true;
        readSingleQuoted(w.value);
      } else if (c == '"') {
        w.quoted = true;
        readDoubleQuoted(w.value, w);
      } else if (c == '$') {
        expandDollar(w.value, false, w);
      } else if (c == '`') {
        decline("command substitution");
      } else if (c == '\\') {
        if (pos_ + 1 >= s_.size()) decline("trailing backslash");
        if (s_[pos_ + 1] == '\n') {
          pos_ += 2;
          continue;
        }
        w.quoted = true;
        w.value += s_[pos_ + 1];
        pos_ += 2;
      } else {
        // An unquoted ~ may be a tilde expansion (at the start, after = or : in assignments).
        if (c == '~') decline("tilde expansion");
        if (c == '*' || c == '?' || c == '[') {
          // tilde expansion or a glob pattern: unless it is the test command itself
          if (!(c == '[' && pos_ == start && pos_ + 1 < s_.size() && isMeta(s_[pos_ + 1]))) {
            if (c == '~') decline("tilde expansion");
            w.unquotedExpansion = true;  // a glob: checked where it matters
          }
        }
        w.value += c;
        ++pos_;
      }
    }
    w.raw = std::string(s_.substr(start, pos_ - start));
    return w;
  }

  // The words of one simple command, up to a separator. Operators other than ; decline,
  // except, where `andOr` is given, "&&" and "||", which end the command: put in `andOr`
  // and consumed with the blank lines after them.
  std::vector<Word> readCommandWords(std::string* andOr = nullptr) {
    std::vector<Word> words;
    for (;;) {
      skipBlanksAndContinuations();
      if (pos_ >= s_.size() || s_[pos_] == '\n' || s_[pos_] == ';') return words;
      char c = s_[pos_];
      if (andOr && (c == '&' || c == '|') && pos_ + 1 < s_.size() && s_[pos_ + 1] == c) {
        *andOr = std::string(2, c);
        pos_ += 2;
        while (pos_ < s_.size() && (s_[pos_] == '\n' || isBlank(s_[pos_]))) ++pos_;
        return words;
      }
      if (!executing_ && (c == '&' || c == '|' || c == '<' || c == '>')) {
        ++pos_;  // not run: operators and redirections only separate words here
        continue;
      }
      if (c == '&' || c == '|') decline("'&', '|', '&&' or '||'");
      if (c == '<' || c == '>') decline("redirection");
      if (c == '(' || c == ')') decline("subshell or function");
      // Assignment words keep ${NAME:=...} side effects in order; others too.
      words.push_back(readWord());
    }
  }

  static bool isAssignment(const Word& w, std::string* name) {
    auto eq = w.raw.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    for (size_t i = 0; i < eq; ++i)
      if (!isNameChar(w.raw[i]) || (i == 0 && !isNameStart(w.raw[0]))) return false;
    *name = w.raw.substr(0, eq);
    return true;
  }

  // The value of an assignment word: everything after "NAME=" (expanded without splitting).
  static std::string assignedValue(const Word& w, const std::string& name) {
    return w.value.substr(name.size() + 1);
  }

  // A command argument: field splitting and globbing of unquoted expansions are declined
  // unless they cannot change the word (non-empty, no blanks, no glob characters).
  static const std::string& plainArgument(const Word& w) {
    if (w.unquotedExpansion &&
        (w.value.empty() || w.value.find_first_of(" \t\n*?[") != std::string::npos))
      decline("an unquoted expansion that field splitting or globbing could change");
    return w.value;
  }

  // commands
  // Runs commands until one of `terminators` (a keyword at command position) or the end.
  // Returns the terminator met ("" at the end).
  std::string runList(const std::vector<std::string_view>& terminators) {
    for (;;) {
      skipSeparators();
      if (atEnd()) {
        if (!terminators.empty()) decline("missing 'fi'");
        return {};
      }
      std::string_view next = peekWordRaw();
      for (auto t : terminators) {
        if (next == t) {
          skipBlanksAndContinuations();
          pos_ += next.size();
          return std::string(next);
        }
      }
      if (next == "if") {
        skipBlanksAndContinuations();
        pos_ += 2;
        runIf();
        continue;
      }
      if (next == "then" || next == "else" || next == "elif" || next == "fi" || next == "case")
        decline("'" + std::string(next) + "'");
      if (executing_ && (next == "do" || next == "done" || next == "while" || next == "for" ||
                         next == "until" || next == "{" || next == "}" || next == "!" ||
                         next == "function"))
        decline("'" + std::string(next) + "'");
      runSimpleCommand(readCommandWords());
    }
  }

  void runIf() {
    bool taken = false;  // a branch has run (or, when not executing, nothing runs)
    const bool outer = executing_;
    for (;;) {
      executing_ = outer && !taken;  // an elif's condition runs only while no branch has
      bool cond = evalConditionList();
      skipSeparators();
      if (peekWordRaw() != "then") decline("'if' without 'then'");
      skipBlanksAndContinuations();
      pos_ += 4;
      executing_ = outer && !taken && cond;
      if (executing_) taken = true;
      std::string end = runList({"elif", "else", "fi"});
      if (end == "elif") continue;
      if (end == "else") {
        executing_ = outer && !taken;
        runList({"fi"});
      }
      executing_ = outer;
      return;
    }
  }

  // `if`'s condition: tests joined by "&&" and "||" (equal precedence, left to right, as
  // the shell has them); an operand whose value cannot change the result is parsed, not
  // evaluated (no ${NAME:=...} side effect).
  bool evalConditionList() {
    std::string op;
    bool result = evalCondition(readCommandWords(&op));
    while (!op.empty()) {
      const bool evaluate = op == "&&" ? result : !result;
      const bool outer = executing_;
      executing_ = outer && evaluate;
      std::string next;
      const bool value = evalCondition(readCommandWords(&next));
      executing_ = outer;
      if (evaluate) result = value;
      op = next;
    }
    return result;
  }

  bool evalCondition(std::vector<Word> words) {
    if (words.empty()) decline("empty condition");
    if (!executing_) return false;  // in a branch not taken: parsed, not evaluated
    bool negate = false;
    if (words[0].raw == "!" && !words[0].quoted) {
      negate = true;
      words.erase(words.begin());
      if (words.empty()) decline("empty condition");
    }
    std::vector<std::string> args;
    const std::string& cmd = words[0].raw;
    if (words[0].quoted || (cmd != "[" && cmd != "test")) decline("condition '" + cmd + "' (only [ and test)");
    for (size_t i = 1; i < words.size(); ++i) args.push_back(plainArgument(words[i]));
    if (cmd == "[") {
      if (args.empty() || args.back() != "]") decline("'[' without ']'");
      args.pop_back();
    }
    bool result = false;
    if (args.empty()) {
      result = false;
    } else if (args.size() == 1) {
      result = !args[0].empty();
    } else if (args.size() == 2 && (args[0] == "-z" || args[0] == "-n")) {
      result = (args[0] == "-z") == args[1].empty();
    } else if (args.size() == 2 && args[0].size() == 2 && args[0][0] == '-' &&
               std::string_view("efdrx").find(args[0][1]) != std::string_view::npos) {
      if (!host_ || !host_->testFile) decline("file test " + args[0]);
      result = host_->testFile(args[0][1], args[1]);
    } else if (args.size() == 3 && (args[1] == "=" || args[1] == "!=")) {
      result = (args[0] == args[2]) == (args[1] == "=");
    } else {
      decline("test expression '" + (args.empty() ? std::string() : args[0]) + " ...'");
    }
    return negate != result;
  }

  void runSimpleCommand(const std::vector<Word>& words) {
    if (words.empty() || !executing_) return;  // in a branch not taken: parsed, not run
    size_t i = 0;
    std::string name;
    while (i < words.size() && isAssignment(words[i], &name)) {
      assign(name, assignedValue(words[i], name));
      ++i;
    }
    if (i == words.size()) return;
    if (i > 0) decline("assignments before a command");
    const Word& cmd = words[0];
    if (cmd.quoted || cmd.unquotedExpansion) decline("a command name from an expansion");
    if (cmd.raw == ":" || cmd.raw == "true") return;
    if (cmd.raw == ".") {
      if (words.size() != 2) decline("'.' with arguments");
      const std::string& file = plainArgument(words[1]);
      if (!host_ || !host_->readFile) decline("'. " + file + "'");
      if (depth_ >= kMaxSourceDepth) decline("'.' nested deeper than " + std::to_string(kMaxSourceDepth));
      auto text = host_->readFile(file);
      if (!text) decline("'. " + file + "': cannot read it");
      Interpreter(*text, vars_, host_, depth_ + 1).run();
      return;
    }
    if (cmd.raw == "export") {
      // All arguments are expanded before export runs (they already are: readWord expanded
      // them in order); then each is applied.
      for (size_t k = 1; k < words.size(); ++k) {
        if (words[k].raw == "-p" || (!words[k].raw.empty() && words[k].raw[0] == '-'))
          decline("export option");
        std::string var;
        if (isAssignment(words[k], &var)) {
          assign(var, assignedValue(words[k], var));
        } else {
          var = plainArgument(words[k]);
          if (!isValidEnvName(var)) decline("export of '" + var + "'");
        }
        if (executing_) this->var(var).exported = true;
      }
      return;
    }
    if (cmd.raw == "unset") {
      size_t k = 1;
      if (k < words.size() && words[k].raw == "-v") ++k;
      for (; k < words.size(); ++k) {
        const std::string& var = plainArgument(words[k]);
        if (!isValidEnvName(var)) decline("unset of '" + var + "'");
        if (executing_) vars_.vars.erase(var);
      }
      return;
    }
    decline("command '" + cmd.raw + "'");
  }
};

}  // namespace

std::string interpretEnvScript(std::string_view script, ShellVars& vars, const ShellHost* host) {
  try {
    Interpreter(script, vars, host, 0).run();
    return {};
  } catch (const Decline& d) {
    return d.reason;
  }
}

}  // namespace ctr::launch
