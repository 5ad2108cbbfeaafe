// Running a program (dexcli, the example worker) from a test as a process and
// capturing its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dex::testing {

// What a program did: its exit code (-1 if it did not exit normally, e.g. was
// killed) and what it printed.
struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `arg` in single quotes for /bin/sh.
inline std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The whole of the file at `path` ("" if it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `program` with `args` through /bin/sh behind `prefix` (a bound such as
// "timeout 20"), with stdout and stderr to the files "out" and "err" in `dir`
// (overwritten), and returns what it did.
inline Ran run_program(const std::string& prefix, const std::string& program,
                       const std::vector<std::string>& args, const std::filesystem::path& dir) {
  std::string command = prefix + " " + quote(program);
  for (const auto& a : args) command += " " + quote(a);
  std::filesystem::path out = dir / "out", err = dir / "err";
  command += " >" + quote(out.string()) + " 2>" + quote(err.string());
  int status = std::system(command.c_str());
  Ran ran;
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.out = slurp(out);
  ran.err = slurp(err);
  return ran;
}

}  // namespace dex::testing
